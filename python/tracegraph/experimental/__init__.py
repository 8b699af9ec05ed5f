"""TensorFlow's tf.experimental: tracegraph has its DLPack module (tg.experimental.dlpack)."""
from tracegraph.experimental import dlpack
