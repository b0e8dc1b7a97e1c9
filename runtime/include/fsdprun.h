/*===- fsdprun.h - run a lowered fsdp step from C -------------------------===*
 *
 * The C API of the runner library (include/fsdp/Runner/Runner.h): load a
 * module lowered by `fsdp-opt --fsdp-pipeline=lower=true`, set its inputs
 * from host memory, run steps on every rank of its mesh, read the gathered
 * outputs. This is what an ML compiler embeds and what Python's
 * `fsdp_mlir.runner` calls; the library is libfsdprun.so.
 *
 * Every call validates its arguments (null or destroyed handles, names,
 * shapes and dtypes against the step's signature, calls out of order) and
 * returns a status; the message of the last failed call on the calling
 * thread is fsdprun_last_error(). The library never exits or aborts its
 * host process. A failed run leaves the program usable unless it returned
 * FSDPRUN_ERR_UNUSABLE (a step failed mid-way on some rank, so the ranks'
 * state is unknown); every later run then fails the same way.
 *
 * Calls on one program are serialized; distinct programs may be used from
 * distinct threads. With the MPI backend every process of the world makes
 * the same calls, and a process holds at most one MPI program at a time.
 *
 *===----------------------------------------------------------------------===*/

#ifndef FSDPRUN_H
#define FSDPRUN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define FSDPRUN_API __attribute__((visibility("default")))
#else
#define FSDPRUN_API
#endif

typedef struct fsdprun_program fsdprun_program_t;

typedef enum {
  FSDPRUN_OK = 0,
  FSDPRUN_ERR_INVALID_ARGUMENT = 1, /* a null pointer or a bad value */
  FSDPRUN_ERR_INVALID_HANDLE = 2,   /* null, destroyed or not a program */
  FSDPRUN_ERR_LOAD = 3,             /* cannot read, parse, check, compile */
  FSDPRUN_ERR_NOT_FOUND = 4,        /* no input or output of that name */
  FSDPRUN_ERR_SHAPE = 5,            /* shape or byte count mismatch */
  FSDPRUN_ERR_DTYPE = 6,            /* element type mismatch */
  FSDPRUN_ERR_ORDER = 7,            /* an output asked for before a run */
  FSDPRUN_ERR_RUN = 8,              /* the run failed; the program is usable */
  FSDPRUN_ERR_UNUSABLE = 9,         /* the program can no longer run */
  FSDPRUN_ERR_BUSY = 10             /* another MPI program in this process */
} fsdprun_status_t;

/* Element types, as numpy names them. */
typedef enum {
  FSDPRUN_F32 = 0,
  FSDPRUN_F64 = 1,
  FSDPRUN_BF16 = 2, /* raw bit patterns, 2 bytes */
  FSDPRUN_F16 = 3,
  FSDPRUN_I32 = 4,
  FSDPRUN_I64 = 5,
  FSDPRUN_U8 = 6 /* any 8-bit type (fp8 bit patterns) */
} fsdprun_dtype_t;

typedef enum { FSDPRUN_THREADS = 0, FSDPRUN_MPI = 1 } fsdprun_backend_t;

typedef struct {
  const char *entry;         /* NULL or "": the module's only entry */
  const char *jit_cache_dir; /* NULL or "": no cache */
  fsdprun_backend_t backend;
  double timeout_s; /* seconds a collective waits for its peers; 0: forever */
  int64_t world;    /* expected number of ranks; 0: the mesh size */
} fsdprun_options_t;

typedef struct {
  int64_t steps;  /* training steps, or timed repetitions (>= 1) */
  int64_t warmup; /* untimed repetitions first (not for training steps) */
  const char *input_dir;  /* NULL: only inputs set with fsdprun_set_input */
  const char *save_dir;   /* training: sharded checkpoints; NULL: none */
  int64_t save_every;     /* also every K global steps; 0: at the end */
  const char *resume_dir; /* training: start from a checkpoint; NULL */
  int64_t cuda_graphs;    /* compute=gpu: 1 (the default) replays a CUDA graph
                             of the third step for the later ones when the
                             step allows it; 0 runs every step as compiled */
  const char *const *more_input_dirs; /* NULL, or a NULL-terminated list of
                             directories searched after input_dir (the first
                             holding <name>.npy wins) */
} fsdprun_run_options_t;

FSDPRUN_API void fsdprun_options_init(fsdprun_options_t *options);
FSDPRUN_API void fsdprun_run_options_init(fsdprun_run_options_t *options);

/* The message of the last failed call on this thread ("" if none). */
FSDPRUN_API const char *fsdprun_last_error(void);
/* A fixed description of a status. */
FSDPRUN_API const char *fsdprun_status_string(fsdprun_status_t status);

/* Loads a lowered module (text or bytecode) and compiles it, or loads a step
 * library built by fsdp-compile without compiling (docs/AOT.md). `options`
 * may be NULL (defaults). On failure *program is NULL. */
FSDPRUN_API fsdprun_status_t fsdprun_program_create_from_file(
    const char *path, const fsdprun_options_t *options,
    fsdprun_program_t **program);
FSDPRUN_API fsdprun_status_t fsdprun_program_create_from_string(
    const char *data, size_t size, const fsdprun_options_t *options,
    fsdprun_program_t **program);
/* Frees the program; NULL is accepted. A destroyed handle is refused by
 * every later call (FSDPRUN_ERR_INVALID_HANDLE). */
FSDPRUN_API fsdprun_status_t fsdprun_program_destroy(fsdprun_program_t *p);

FSDPRUN_API fsdprun_status_t fsdprun_world_size(fsdprun_program_t *p,
                                                int64_t *size);
/* Whether the entry is a training step (1) or not (0). */
FSDPRUN_API fsdprun_status_t fsdprun_is_training(fsdprun_program_t *p,
                                                 int *training);
/* Global training steps taken so far. */
FSDPRUN_API fsdprun_status_t fsdprun_steps_taken(fsdprun_program_t *p,
                                                 int64_t *steps);

/* The inputs (arguments) and outputs of the entry. The name and shape stay
 * valid while the program lives. An input without a layout is the batch of
 * every rank (rank r's rows r*B..(r+1)*B-1): its shape is the global one. A
 * training run's per-step scalar outputs get a leading step dimension when
 * read with fsdprun_get_output. */
FSDPRUN_API fsdprun_status_t fsdprun_num_inputs(fsdprun_program_t *p,
                                                int64_t *count);
FSDPRUN_API fsdprun_status_t fsdprun_input_info(
    fsdprun_program_t *p, int64_t index, const char **name,
    fsdprun_dtype_t *dtype, int64_t *rank, const int64_t **shape);
FSDPRUN_API fsdprun_status_t fsdprun_num_outputs(fsdprun_program_t *p,
                                                 int64_t *count);
FSDPRUN_API fsdprun_status_t fsdprun_output_info(
    fsdprun_program_t *p, int64_t index, const char **name,
    fsdprun_dtype_t *dtype, int64_t *rank, const int64_t **shape);

/* Sets the global value of input `name` from `bytes` bytes at `data`
 * (row-major, `rank` dimensions of `shape`), checked against the
 * signature. A training step's fed-back argument (parameters, optimizer
 * state) set here restarts from this value at the next run. */
FSDPRUN_API fsdprun_status_t fsdprun_set_input(
    fsdprun_program_t *p, const char *name, const void *data, size_t bytes,
    fsdprun_dtype_t dtype, int64_t rank, const int64_t *shape);

/* Runs `options->steps` steps on every rank (`options` NULL: one step). A
 * training step continues from the state the previous run left. */
FSDPRUN_API fsdprun_status_t fsdprun_run(fsdprun_program_t *p,
                                         const fsdprun_run_options_t *options);

/* The shape of output `name` of the last run. */
FSDPRUN_API fsdprun_status_t fsdprun_output_shape(fsdprun_program_t *p,
                                                  const char *name,
                                                  int64_t *rank,
                                                  const int64_t **shape);
/* Copies output `name` of the last run into `data` (`bytes` must be its
 * size). Under MPI, outputs are on rank 0 only (others: FSDPRUN_ERR_ORDER).
 */
FSDPRUN_API fsdprun_status_t fsdprun_get_output(fsdprun_program_t *p,
                                                const char *name, void *data,
                                                size_t bytes);
/* Writes every output of the last run as <dir>/<name>.npy (the directory is
 * created), each through a temporary file and a rename: the files
 * `fsdp-run --outputs dir` writes. Under MPI, on rank 0 only. */
FSDPRUN_API fsdprun_status_t fsdprun_write_outputs(fsdprun_program_t *p,
                                                   const char *dir);
/* The last run's timings and memory as JSON (fsdp-run --json's object);
 * valid until the next call on the program. */
FSDPRUN_API fsdprun_status_t fsdprun_report_json(fsdprun_program_t *p,
                                                 const char **json);

#ifdef __cplusplus
}
#endif

#endif /* FSDPRUN_H */
