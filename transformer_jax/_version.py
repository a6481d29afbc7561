"""The package's version: setup.py reads this line (without importing the package, which needs
JAX); `transformer_jax.__version__` imports it."""
__version__ = "0.2.0"
