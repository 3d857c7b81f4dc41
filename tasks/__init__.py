"""GSM8K and GPQA tasks whose prompts and scoring match lm-eval 0.4.13, offline."""
