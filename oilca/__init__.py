"""Shared library code of the stages and trainers: the data contract, argument checks, the CLI, progress,
the policy and its artifact, the iVAE network."""
