"""Training stage: the toy base pretrained, a GGUF base dequantised, experts fine-tuned (SFT) with checkpoints."""
