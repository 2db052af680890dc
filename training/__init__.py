"""What the trainers share above the env backends: the policy, its artifact and its evaluation (policy.py), and the
common flags, run folders and run facts of every trainer (trainer.py)."""
