"""`ckkb build`: every stage over the source trees into a new knowledge base (see `run`)."""

from ckkb.kb.build.run import BuildSummary, Progress, build

__all__ = ["BuildSummary", "Progress", "build"]
