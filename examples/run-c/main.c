/*===- main.c - running a lowered fsdp step from C ------------------------===*
 *
 * Loads a module lowered from test/Tools/Inputs/step.mlir (y = x w^T on a
 * 4-rank mesh, w sharded by rows, x the batch of every rank), sets the
 * inputs from memory, runs one step and checks rank 0's y against the
 * product computed here; then checks that misuse gets a status, not a
 * crash.
 *
 *   fsdp-run-c-example LOWERED.mlir
 *
 *===----------------------------------------------------------------------===*/

#include "fsdprun.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(int ok, const char *what) {
  if (!ok) {
    fprintf(stderr, "FAIL: %s (%s)\n", what, fsdprun_last_error());
    ++failures;
  }
}

static int run_step(fsdprun_program_t *p) {
  float w[10][4], x[8][4], y[2][10];
  for (int i = 0; i < 10; ++i)
    for (int k = 0; k < 4; ++k)
      w[i][k] = (float)(i - 2 * k) / 8.0f;
  for (int r = 0; r < 8; ++r)
    for (int k = 0; k < 4; ++k)
      x[r][k] = (float)(r + k) / 4.0f;
  int64_t wshape[2] = {10, 4}, xshape[2] = {8, 4};
  expect(fsdprun_set_input(p, "w", w, sizeof w, FSDPRUN_F32, 2, wshape) ==
             FSDPRUN_OK,
         "set w");
  expect(fsdprun_set_input(p, "x", x, sizeof x, FSDPRUN_F32, 2, xshape) ==
             FSDPRUN_OK,
         "set x");
  expect(fsdprun_run(p, NULL) == FSDPRUN_OK, "run");
  expect(fsdprun_get_output(p, "y", y, sizeof y) == FSDPRUN_OK, "get y");
  double worst = 0;
  for (int m = 0; m < 2; ++m)
    for (int n = 0; n < 10; ++n) {
      double ref = 0;
      for (int k = 0; k < 4; ++k)
        ref += (double)x[m][k] * w[n][k];
      worst = fmax(worst, fabs(y[m][n] - ref));
    }
  expect(worst < 1e-5, "y = x w^T");
  printf("y[0][0..2] = %g %g %g, worst error %.2g\n", y[0][0], y[0][1], y[0][2],
         worst);
  return 0;
}

static void misuse(fsdprun_program_t *p) {
  float small[3] = {0};
  int64_t bad[2] = {3, 1}, wshape[2] = {10, 4};
  double d[40] = {0};
  expect(fsdprun_set_input(p, "w", small, sizeof small, FSDPRUN_F32, 2, bad) ==
             FSDPRUN_ERR_SHAPE,
         "a wrong shape is refused");
  expect(fsdprun_set_input(p, "w", d, sizeof d, FSDPRUN_F64, 2, wshape) ==
             FSDPRUN_ERR_DTYPE,
         "a wrong dtype is refused");
  expect(fsdprun_set_input(p, "nope", small, sizeof small, FSDPRUN_F32, 2,
                           bad) == FSDPRUN_ERR_NOT_FOUND,
         "an unknown input is refused");
  expect(fsdprun_get_output(p, "y", small, sizeof small) == FSDPRUN_ERR_SHAPE,
         "a short output buffer is refused");
  expect(fsdprun_run(NULL, NULL) == FSDPRUN_ERR_INVALID_HANDLE,
         "a null handle is refused");
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: fsdp-run-c-example LOWERED.mlir\n");
    return 2;
  }
  fsdprun_program_t *p = NULL;
  if (fsdprun_program_create_from_file(argv[1], NULL, &p) != FSDPRUN_OK) {
    fprintf(stderr, "cannot load %s: %s\n", argv[1], fsdprun_last_error());
    return 1;
  }
  float y[2][10];
  expect(fsdprun_get_output(p, "y", y, sizeof y) == FSDPRUN_ERR_ORDER,
         "an output before any run is refused");
  int64_t world = 0;
  expect(fsdprun_world_size(p, &world) == FSDPRUN_OK && world == 4,
         "the world is the mesh");
  run_step(p);
  misuse(p);
  expect(fsdprun_program_destroy(p) == FSDPRUN_OK, "destroy");
  expect(fsdprun_run(p, NULL) == FSDPRUN_ERR_INVALID_HANDLE,
         "a destroyed handle is refused");
  expect(fsdprun_program_create_from_file("/nonexistent.mlir", NULL, &p) ==
                 FSDPRUN_ERR_LOAD &&
             p == NULL,
         "a missing file is a load error");
  if (failures)
    return 1;
  printf("C API example: OK\n");
  return 0;
}
