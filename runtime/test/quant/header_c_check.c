/* Compiled as C: the public header must stay plain C. */
#include "fsdprt_quant.h"

int fsdprt_quant_header_c_check(void) {
  uint64_t bytes = 0;
  const int64_t shape[2] = {32, 32};
  return fsdprt_quant_wire_bytes(FSDPRT_QUANT_MXFP8_ROWWISE, shape, 2, &bytes);
}
