/* qvanilla.h's calls for generated code are static inline: no symbol in the library.  Their
 * addresses, for the tests to call them through ctypes as generated code does. */
#include "qvanilla_calls.h"

__typeof__(qvanilla_conv2d_nhwc_packed_s8)* const qvanilla_conv2d_nhwc_packed_s8_address =
    qvanilla_conv2d_nhwc_packed_s8;
__typeof__(qvanilla_depthwise_conv2d_nhwc_packed_s8)* const qvanilla_depthwise_conv2d_nhwc_packed_s8_address =
    qvanilla_depthwise_conv2d_nhwc_packed_s8;
__typeof__(qvanilla_conv2d_nhwc_packed8_s8)* const qvanilla_conv2d_nhwc_packed8_s8_address =
    qvanilla_conv2d_nhwc_packed8_s8;
