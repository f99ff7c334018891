"""The aiter extraction stages: kernel lists, tuner/runtime facts, config CSVs.

Each lives in its own module; this one only lists them for ckkb.pipeline (STAGES). The audit of
the configs is a stage of its own, in ckkb.audit.stage.
"""

from __future__ import annotations

from ckkb.extract import aiter_configs, aiter_kernels, aiter_tuners

STAGES = [aiter_kernels.STAGE, aiter_tuners.STAGE, aiter_configs.STAGE]
