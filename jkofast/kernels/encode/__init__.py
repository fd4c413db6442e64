"""Sentence-encoder kernels: the element-wise parts of a BERT forward pass (LayerNorm, GELU, softmax, pooling)."""
