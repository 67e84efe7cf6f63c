"""Tiling: a CTA tile per GEMM-like and attention kernel, and the tile-level estimate."""
