"""A Keras CNN (tf.keras 2.15, saved as .h5) through `tvmc compile --model-format keras` to a running MLF.

TensorFlow (the [keras] extra, installed by scripts/test.sh) runs in its own process: it and
TVM each bring an LLVM and must not share one.
"""
import subprocess
import sys
import textwrap

import numpy as np

from conftest import VANILLA_EXT, assert_close, kernel_calls, run_tvmc
from tvm_extension.mlf import build

MAKE_MODEL = textwrap.dedent("""
    import sys
    import numpy as np
    import tensorflow as tf

    tf.keras.utils.set_random_seed(0)
    layers = tf.keras.layers
    model = tf.keras.Sequential([
        tf.keras.Input((16, 16, 3), batch_size=1, name="image"),
        layers.Conv2D(8, 3, padding="same", activation="relu"),          # offloaded with bias and ReLU
        layers.Conv2D(8, 3, padding="same"),                              # offloaded with bias
        layers.Conv2D(16, 3, strides=2, padding="same", activation="relu"),  # offloaded: stride 2, pads 0/1
        layers.DepthwiseConv2D(3, padding="same"),                      # offloaded: depthwise
        layers.Conv2D(16, 3, dilation_rate=2, padding="same"),          # dilated: CPU
        layers.MaxPooling2D(2),
        layers.Conv2D(16, 5, padding="same", activation="relu"),         # offloaded, 5x5
        layers.Flatten(),
        layers.Dense(10),
    ])
    model.save(sys.argv[1])
    x = np.random.default_rng(1).standard_normal((1, 16, 16, 3)).astype(np.float32)
    np.savez(sys.argv[2], x=x, y=model.predict(x, verbose=0))
""")


def test_keras_cnn(tmp_path):
    script = tmp_path / "make.py"
    script.write_text(MAKE_MODEL)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "cnn.h5"), str(tmp_path / "ref.npz")],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "cnn.tar"
    done = run_tvmc("compile", "--model-format", "keras", "--target", "vanilla_accelerator",
                    "--experimental-tvm-extension", VANILLA_EXT, tmp_path / "cnn.h5", "-f", "mlf", "-o", out)
    assert done.returncode == 0, done.stderr[-3000:]
    assert kernel_calls(out) == 5
    reference = np.load(tmp_path / "ref.npz")
    program = build(out, tmp_path / "build")
    (got,) = program.run({program.inputs[0].name: reference["x"]})[0].values()
    assert_close(got, reference["y"], what="MLF vs Keras predict")
