"""tg.random: TF 2's seeded random numbers (tf.random); the values are not TensorFlow's."""
from tracegraph._core import (normal, set_seed, stateless_normal, stateless_truncated_normal,
                              stateless_uniform, truncated_normal, uniform)
