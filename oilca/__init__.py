"""The ground of the project's shared code (it imports no other package of the project): the data contract, argument
checks, the CLI, progress, and the iVAE network."""
