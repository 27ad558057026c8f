"""What more than one backend needs, for backends to import (they import the kit and TVM, never
each other).  Each module is one topic; a backend takes what fits its kernels and keeps what is
its own (its C header's limits, its weight packing, its TIR pass).

Relay patterns and why a match is refused (one phrase, shown in the offload report):

* ``conv_patterns``: float32 Conv2D for a conv engine with an output stage:
  ``conv2d_residual_pattern``, ``conv2d_pattern``, ``conv2d_alone_pattern`` (register them in
  that order), ``split_composite`` (conv / bias / residual / activation of a match),
  ``is_depthwise``, ``clamp_bounds``, ``why_not_offloaded(root, max_kernel_size, max_taps)``,
  ``engine_problem`` (the argument checks of the kernel), ``hard_activation_reason``.
* ``qconv_patterns``: int8 chains ``qnn.conv2d -> bias -> [maximum] -> qnn.requantize -> [clip]``
  in NHWC (TFLite, ONNX QDQ): ``qconv2d_pattern``, ``split_chain`` ({op name: call}),
  ``constant_operand``, ``out_channels``, ``is_depthwise``, ``conv_problem`` (the conv alone),
  ``why_not_offloaded(root, shifts)`` (the chain), ``chain_clamp``, ``lower_clamps``.

Compile-time arithmetic:

* ``quantization``: a chain's integer parameters: ``chain_channel_params`` / ``channel_params``
  (per-channel [bias, multiplier, shift]), ``channel_multipliers``, ``fixed_point_multiplier``,
  ``activation_range``, ``fold_bias`` (the input zero point folded into the bias), and the
  TVM / TFLite rounding reference (``requantize_int``, ``requantize``, ``rounding_code``,
  ``ROUNDING_UPWARD`` / ``ROUNDING_TFLITE``) that tests compare kernels with.
* ``limits``: ``c_limits(header, "PREFIX_")`` (a kernel's ``#define`` limits, so patterns refuse
  what the C refuses), ``conv_geometry`` (the integers a conv passes to a kernel),
  ``below_one``, ``window_extent``, ``INT32_MAX``, ``PTRDIFF_MAX``.
* ``tiling``: ``positions_read`` (input positions some window reads: tiling lower bounds).

Relay passes a backend registers:

* ``fold``: ``fold_batch_norm_pass``, ``unflatten_prelu_pass`` (before the patterns).
* ``layout``: ``offload_layout_pass`` (the accepted convs, and what follows them, in the kernel's
  layout), ``as_kernel_layout``, ``fold_weights_pass`` (cast/transpose of weights folded),
  ``pack_weights_pass`` (an offloaded conv's weights permuted once, at compile time).
* ``describe``: ``describe_pass`` (each offloaded conv's parameter roles, window and clamp as a
  function attribute, for the TIR pass).

TIR:

* ``calls``: ``status_checked`` (a C call whose non-zero status stops the inference), without Relay.
* ``scopes``: ``scratchpad_scope`` (a memory scope per scratchpad partition and size,
  registered once with TVM's memory info).

C (the folder ``c/``, found with ``tvm_extension.api.resources.data_folder("tvm_extension.kit", "c")``;
a backend's ``codegen.py`` includes a header from it by absolute path, and the framework ships the
folder into the MLF once):

* ``kit_conv_f32.{h,c}``: a float32 Conv2D engine, dense and depthwise, NCHW and NHWC, with its
  output stage (bias, residual, PReLU, clamp); ``KIT_CONV_F32_MAX_TAPS`` for ``limits.c_limits``.
* ``kit_requantize.h``: TVM's and TFLite's fixed-point requantization (``kit_requantize``,
  ``kit_requantize_tflite``), header only.
"""
