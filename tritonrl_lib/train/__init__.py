"""Training: supervised fine-tuning (`sft/`) and reinforcement learning (`rl/`: best-of-N, GRPO, the
curriculum), and the Trainer checkpoint folders both resume from."""
