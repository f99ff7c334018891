"""The aiter extraction stages, in build order: kernel lists, tuner/runtime facts, config CSVs, audit.

Each lives in its own module; this one only lists them for ckkb.kb.stages (STAGES).
"""

from __future__ import annotations

from ckkb.extract import aiter_configs, aiter_kernels, aiter_tuners

STAGES = [aiter_kernels.STAGE, aiter_tuners.STAGE, aiter_configs.STAGE]
