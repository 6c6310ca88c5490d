"""The block and its log-probability: what moves, and how much the logp changes.

Every sampler reads the model through this folder; nothing here draws a random number. Its
modules are mapped in docs/architecture.md (``logp/``): the block's layout (``layout``), the
neighbour differences (``differences``; ``local_differences`` and the modules of its plan), the
relaxation for first-order differences (``relax``), the model's logp graph built once
(``model_logp``), factor-local UAI logps (``local_logp``) and graph helpers.
"""
