"""Supervised fine-tuning: LoRA SFT with TRL's SFTTrainer (`trainer`), its log and time budget, packed
attention and fused ops for speed, and synthetic records for tests."""
