"""Text-analysis kernels: word-run tokens over code points, vocabulary hash lookup, query TF-IDF."""

__all__ = ["tokenize"]  # kernel modules
