"""Reinforcement learning against the verifier: `entry.train_rl` dispatches to best-of-N or GRPO;
the curriculum draws tasks, `groups` samples and verifies one step's groups of `Candidate`s
(candidate.py), `rewards.reward` is the verifier's reward as a plain function, `run_frame` holds an
RL run's checkpoints, log and best policy."""
