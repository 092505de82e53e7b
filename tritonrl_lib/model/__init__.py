"""The policy: loading a model (embedded, tiny, any Hugging Face id or folder) with LoRA, the model
cache, random-weight stand-ins of published architectures, and the one prompt every stage asks."""
