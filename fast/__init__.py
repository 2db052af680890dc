"""The fast path: the reference trainers with seeds side by side, sampling on the device and CUDA graphs."""
