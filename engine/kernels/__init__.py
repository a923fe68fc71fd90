"""Triton kernels and their torch definitions, chosen by registry.py."""
