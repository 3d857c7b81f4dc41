"""A faithful PyTorch runtime of the DeepSeek-V4.1 architecture at any scale."""
