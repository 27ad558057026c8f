"""End to end on the engine at hand (hhb-tvm's tvmc, or this project's tvmc on apache-tvm): the
backend installed, tvmc -> MLF -> gcc -> run, against TVM's own C build of the same model."""
from tvm_extension.testing import assert_offloads_and_matches_plain_c, fetch


def test_a_model_offloads_and_matches_tvms_own_c(tmp_path):
    """MLPerf Tiny's DS-CNN (int8 TFLite, TVM's rounding)."""
    assert_offloads_and_matches_plain_c("chocolate", fetch("kws_dscnn_int8"), tmp_path, int8=True)
