"""End to end on the engine at hand (hhb-tvm's tvmc, or this project's tvmc on apache-tvm): the
backend installed, tvmc -> MLF -> gcc -> run, against TVM's own C build of the same model."""
from tvm_extension.testing import assert_offloads_and_matches_plain_c, example_model


def test_a_model_offloads_and_matches_tvms_own_c(tmp_path):
    """The example CNN (float)."""
    assert_offloads_and_matches_plain_c("strawberry", example_model("cnn"), tmp_path)
