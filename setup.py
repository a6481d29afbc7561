"""transformer_jax: every idea of the Transformer as a small, tested Flax module."""
from setuptools import find_packages, setup

# Exact pins: the set measured to install and work together on Python 3.11 (see constraints.txt
# for the transitive pins). TensorFlow is deliberately absent: tensorflow-datasets runs without it
# through the array_record format and tfds.data_source (read by grain).
INSTALL_REQUIRES = [
    "jax==0.10.2",
    "jaxlib==0.10.2",
    "flax==0.12.8",
    "optax==0.2.8",
    "chex==0.1.92",
    "ml_collections==1.1.0",
    "absl-py==2.5.1",
    "orbax-checkpoint==0.12.8",
    "tensorflow-datasets==4.9.10",
    "importlib_resources==7.1.0",  # TFDS on Python 3.11 imports it but declares it for <3.9 only
    "array_record==0.8.6",
    "grain==0.2.18",
    "tensorboard==2.21.0",
    "tensorboardX==2.6.5",
    "matplotlib==3.11.2",
    "numpy==2.4.6",
    "psutil==7.2.2",
    "scipy==1.17.1",  # bootstrap intervals in study verdicts (also a jax dependency)
]

TEST_REQUIRES = [
    "pytest==9.2.0",
    "hypothesis==6.170.17",
    "torch==2.13.0",  # CPU build, reference implementations in tests and benchmarks only
]

setup(
    name="transformer_jax",
    version="0.1.0",
    description="The Transformer, explained as small tested JAX/Flax modules and ablation studies.",
    packages=find_packages(include=["transformer_jax", "transformer_jax.*"]),
    python_requires=">=3.11",
    install_requires=INSTALL_REQUIRES,
    extras_require={"test": TEST_REQUIRES},
)
