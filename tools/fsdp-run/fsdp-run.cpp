//===- fsdp-run.cpp - run a lowered fsdp program on W ranks ---------------===//
//
// JIT-compiles a module produced by `fsdp-opt --fsdp-pipeline=lower=true`,
// shards the global inputs by the layouts the compiler recorded, runs every
// rank (threads of this process, or one process per rank under mpirun) and
// writes the gathered results as .npy files.
//
//===----------------------------------------------------------------------===//

#include "Npy.h"
#include "fsdp/Dialect/FSDP/IR/FSDPOps.h"
#include "fsdp/Layout/LayoutMath.h"
#include "fsdprt.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/ExecutionEngine/ExecutionEngine.h"
#include "mlir/ExecutionEngine/OptUtils.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/InitAllDialects.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <thread>

using namespace mlir;
namespace lm = ::fsdp::layout;
namespace cl = llvm::cl;

static cl::opt<std::string>
    inputFile(cl::Positional, cl::desc("<lowered .mlir>"), cl::Required);
static cl::opt<std::string> entryName("entry", cl::desc("Function to run"),
                                      cl::init(""));
static cl::list<std::string>
    inputsDirs("inputs",
               cl::desc("Directory of global .npy inputs (repeatable: the "
                        "first directory holding <name>.npy wins)"),
               cl::OneOrMore);
static cl::opt<std::string>
    outputsDir("outputs", cl::desc("Directory for gathered .npy results"),
               cl::Required);
static cl::opt<std::string> backendName("backend",
                                        cl::desc("threads (default) or mpi"),
                                        cl::init("threads"));
static cl::opt<int64_t>
    worldSize("world", cl::desc("Number of ranks (default: mesh size)"),
              cl::init(0));
static cl::opt<double>
    timeoutSeconds("timeout",
                   cl::desc("Seconds a collective waits for its peers"),
                   cl::init(60.0));
static cl::opt<bool> writeAllRanks(
    "all-ranks",
    cl::desc("Also write every rank's copy of results without a layout as "
             "<name>.rank<r>.npy"),
    cl::init(false));
static cl::opt<bool>
    printStats("print-comm-stats",
               cl::desc("Print collectives and bytes per rank"),
               cl::init(false));

#ifdef FSDP_HAVE_OPENBLAS
extern "C" void openblas_set_num_threads(int);
#endif

namespace {

[[noreturn]] void fail(const llvm::Twine &message) {
  llvm::errs() << "fsdp-run: error: " << message << "\n";
  std::exit(1);
}

/// One argument or result of the entry, as recorded by the compiler.
struct Port {
  std::string name;
  RankedTensorType type;       // what the rank's function sees (slot)
  RankedTensorType globalType; // the full tensor
  std::optional<lm::Layout> layout;
  int64_t elementBytes() const {
    return std::max<int64_t>(1, type.getElementTypeBitWidth() / 8);
  }
};

std::string npyDescr(Type t) {
  if (t.isF32())
    return "<f4";
  if (t.isF64())
    return "<f8";
  if (t.isBF16() || t.isF16())
    return t.isBF16() ? "<u2" : "<f2";
  if (t.isInteger(32))
    return "<i4";
  if (t.isInteger(64))
    return "<i8";
  if (t.getIntOrFloatBitWidth() == 8)
    return "|u1";
  return "";
}

/// Calls `fn(slotOffset, globalOffset, count)` for every contiguous run of
/// elements this rank owns, in slot (row-major) order.
template <typename Fn>
void forEachOwnedRun(const lm::LocalShard &shard,
                     const std::vector<int64_t> &global, Fn fn) {
  size_t rank = global.size();
  if (rank == 0) {
    fn(0, 0, 1);
    return;
  }
  // Per dim: local position -> global index.
  std::vector<std::vector<int64_t>> index(rank);
  for (size_t d = 0; d < rank; ++d)
    for (const lm::Range &r : shard.dims[d].ranges)
      for (int64_t x = r.begin; x < r.end; ++x)
        index[d].push_back(x);
  std::vector<int64_t> slotStride(rank, 1), globalStride(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) {
    slotStride[d] = slotStride[d + 1] * shard.slotShape[d + 1];
    globalStride[d] = globalStride[d + 1] * global[d + 1];
  }
  std::vector<int64_t> pos(rank, 0);
  for (size_t d = 0; d < rank; ++d)
    if (index[d].empty())
      return;
  const std::vector<int64_t> &inner = index[rank - 1];
  while (true) {
    int64_t slotOff = 0, globalOff = 0;
    for (size_t d = 0; d + 1 < rank; ++d) {
      slotOff += pos[d] * slotStride[d];
      globalOff += index[d][pos[d]] * globalStride[d];
    }
    // Split the innermost dim into runs of consecutive global indices.
    size_t i = 0;
    while (i < inner.size()) {
      size_t j = i + 1;
      while (j < inner.size() && inner[j] == inner[j - 1] + 1)
        ++j;
      fn(slotOff + i, globalOff + inner[i], j - i);
      i = j;
    }
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++pos[d] < (int64_t)index[d].size())
        break;
      pos[d] = 0;
    }
    if (d == (size_t)-1)
      break;
  }
}

/// A strided memref descriptor as the C interface passes it.
struct Descriptor {
  std::vector<int64_t> words; // allocated, aligned, offset, sizes, strides
  static Descriptor forBuffer(void *data, ArrayRef<int64_t> shape) {
    Descriptor d;
    d.words.push_back(reinterpret_cast<int64_t>(data));
    d.words.push_back(reinterpret_cast<int64_t>(data));
    d.words.push_back(0);
    for (int64_t s : shape)
      d.words.push_back(s);
    int64_t stride = 1;
    std::vector<int64_t> strides(shape.size());
    for (size_t i = shape.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= shape[i];
    }
    d.words.insert(d.words.end(), strides.begin(), strides.end());
    return d;
  }
};

struct Program {
  std::vector<int64_t> meshShape;
  std::vector<std::string> axisNames;
  std::vector<Port> args, results;
  std::string entry;
};

std::vector<Port> readPorts(ArrayAttr list, ModuleOp module,
                            std::vector<int64_t> &meshShape,
                            std::vector<std::string> &axisNames) {
  std::vector<Port> ports;
  for (Attribute a : list) {
    auto dict = cast<DictionaryAttr>(a);
    Port p;
    p.name = dict.getAs<StringAttr>("name").str();
    p.type = cast<RankedTensorType>(dict.getAs<TypeAttr>("type").getValue());
    p.globalType = p.type;
    if (auto g = dict.getAs<TypeAttr>("global_type"))
      p.globalType = cast<RankedTensorType>(g.getValue());
    if (auto layout = dict.getAs<mlir::fsdp::LayoutAttr>("layout")) {
      auto mesh = SymbolTable::lookupNearestSymbolFrom<mlir::fsdp::MeshOp>(
          module, layout.getMesh().getAttr());
      if (!mesh)
        fail("layout of '" + p.name + "' refers to an unknown mesh");
      std::vector<int64_t> shape(mesh.getAxisSizes().begin(),
                                 mesh.getAxisSizes().end());
      if (!meshShape.empty() && meshShape != shape)
        fail("the entry uses more than one mesh");
      meshShape = shape;
      axisNames.clear();
      for (Attribute n : mesh.getAxisNames())
        axisNames.push_back(cast<StringAttr>(n).str());
      p.layout = layout.toLayout(mesh.getAxisSizes());
      if (!lm::tensorParallelAxes(*p.layout).empty())
        fail("'" + p.name +
             "' has a tensor-parallel layout; fsdp-run runs "
             "data-parallel meshes only");
    }
    ports.push_back(std::move(p));
  }
  return ports;
}

/// Reads the signature, then strips everything fsdp so that only the LLVM
/// dialect is left for translation.
Program prepare(ModuleOp module) {
  Program prog;
  auto sigs = module->getAttrOfType<DictionaryAttr>("fsdp.signatures");
  if (!sigs || sigs.empty())
    fail("the module has no fsdp.signatures; compile it with "
         "fsdp-opt --fsdp-pipeline=lower=true (or fsdp-lower-to-llvm)");
  prog.entry = entryName;
  if (prog.entry.empty()) {
    if (sigs.size() != 1)
      fail("the module has several entries; choose one with --entry");
    prog.entry = sigs.begin()->getName().str();
  }
  auto sig = sigs.getAs<DictionaryAttr>(prog.entry);
  if (!sig) {
    std::string known;
    for (NamedAttribute e : sigs)
      known += " " + e.getName().str();
    fail("unknown entry '" + prog.entry + "'; the module has:" + known);
  }
  prog.args = readPorts(sig.getAs<ArrayAttr>("args"), module, prog.meshShape,
                        prog.axisNames);
  prog.results = readPorts(sig.getAs<ArrayAttr>("results"), module,
                           prog.meshShape, prog.axisNames);
  if (prog.meshShape.empty()) {
    auto meshes = module.getOps<mlir::fsdp::MeshOp>();
    if (meshes.empty())
      prog.meshShape = {1};
    else {
      auto mesh = *meshes.begin();
      prog.meshShape.assign(mesh.getAxisSizes().begin(),
                            mesh.getAxisSizes().end());
      for (Attribute n : mesh.getAxisNames())
        prog.axisNames.push_back(cast<StringAttr>(n).str());
    }
  }
  for (auto mesh : llvm::to_vector(module.getOps<mlir::fsdp::MeshOp>()))
    mesh.erase();
  auto strip = [](Operation *op) {
    for (NamedAttribute a : llvm::to_vector(op->getDiscardableAttrs()))
      if (a.getName().getValue().starts_with("fsdp."))
        op->removeDiscardableAttr(a.getName());
  };
  strip(module);
  module.walk([&](LLVM::LLVMFuncOp f) {
    strip(f);
    auto clean = [](ArrayAttr attrs) -> ArrayAttr {
      if (!attrs)
        return attrs;
      SmallVector<Attribute> out;
      for (Attribute a : attrs) {
        SmallVector<NamedAttribute> kept;
        for (NamedAttribute n : cast<DictionaryAttr>(a))
          if (!n.getName().getValue().starts_with("fsdp."))
            kept.push_back(n);
        out.push_back(DictionaryAttr::get(attrs.getContext(), kept));
      }
      return ArrayAttr::get(attrs.getContext(), out);
    };
    if (auto a = f.getArgAttrsAttr())
      f.setArgAttrsAttr(clean(a));
    if (auto r = f.getResAttrsAttr())
      f.setResAttrsAttr(clean(r));
  });
  return prog;
}

/// Loads and checks every input; returns the global arrays.
std::vector<::fsdp::npy::Array> loadInputs(const Program &prog, int64_t world) {
  std::vector<::fsdp::npy::Array> inputs;
  for (const Port &p : prog.args) {
    ::fsdp::npy::Array a;
    std::string error, path = inputsDirs.front() + "/" + p.name + ".npy";
    for (const std::string &dir : inputsDirs)
      if (llvm::sys::fs::exists(dir + "/" + p.name + ".npy")) {
        path = dir + "/" + p.name + ".npy";
        break;
      }
    if (!::fsdp::npy::read(path, a, error))
      fail("input '" + p.name + "': " + error);
    std::string want = npyDescr(p.type.getElementType());
    if (a.descr != want && !(want == "<u2" && a.descr == "|V2"))
      fail("input '" + p.name + "' (" + path + ") has dtype " + a.descr +
           ", expected " + want);
    std::vector<int64_t> expect = p.globalType.getShape().vec();
    if (!p.layout && !expect.empty())
      expect[0] *= world; // data: the global batch
    if (a.shape != expect) {
      std::string got, exp;
      for (int64_t d : a.shape)
        got += std::to_string(d) + " ";
      for (int64_t d : expect)
        exp += std::to_string(d) + " ";
      fail("input '" + p.name + "' (" + path + ") has shape [ " + got +
           "], expected [ " + exp + "]" +
           (p.layout ? "" : " (this rank's batch times the world size)"));
    }
    inputs.push_back(std::move(a));
  }
  return inputs;
}

/// Whether `rank` holds the whole of a Partial(sum) value (coordinate 0 on
/// every partial axis); the other ranks of its group hold zeros.
bool ownsPartial(const lm::Layout &layout, int64_t rank) {
  std::vector<int64_t> coords = lm::rankToCoords(layout.meshShape, rank);
  for (size_t a = 0; a < layout.placements.size(); ++a)
    if (layout.placements[a].kind == lm::Placement::Kind::Partial &&
        coords[a] != 0)
      return false;
  return true;
}

bool hasPartial(const lm::Layout &layout) {
  for (const lm::Placement &p : layout.placements)
    if (p.kind == lm::Placement::Kind::Partial)
      return true;
  return false;
}

/// This rank's buffer of input `p`: its padded slot, or its batch rows.
std::vector<char> shardInput(const Port &p, const ::fsdp::npy::Array &global,
                             int64_t rank) {
  int64_t bytes = p.elementBytes();
  std::vector<char> buf(p.type.getNumElements() * bytes, 0);
  if (p.layout && !ownsPartial(*p.layout, rank))
    return buf; // a Partial(sum) input: one rank per group holds the value
  if (p.layout) {
    lm::LocalShard s = lm::localShard(*p.layout, global.shape, rank);
    forEachOwnedRun(s, global.shape, [&](int64_t so, int64_t go, int64_t n) {
      std::memcpy(buf.data() + so * bytes, global.data.data() + go * bytes,
                  n * bytes);
    });
  } else {
    std::memcpy(buf.data(), global.data.data() + rank * buf.size(), buf.size());
  }
  return buf;
}

/// Reads one result out of the C interface's result struct.
std::vector<char> copyResult(const Port &p, const int64_t *words) {
  int64_t rank = p.type.getRank(), bytes = p.elementBytes();
  const char *aligned = reinterpret_cast<const char *>(words[1]);
  int64_t offset = words[2];
  std::vector<int64_t> sizes(words + 3, words + 3 + rank),
      strides(words + 3 + rank, words + 3 + 2 * rank);
  std::vector<char> out(p.type.getNumElements() * bytes);
  std::vector<int64_t> idx(rank, 0);
  for (int64_t e = 0; e < p.type.getNumElements(); ++e) {
    int64_t src = offset;
    for (int64_t d = 0; d < rank; ++d)
      src += idx[d] * strides[d];
    std::memcpy(out.data() + e * bytes, aligned + src * bytes, bytes);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++idx[d] < sizes[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

struct RankRun {
  std::vector<std::vector<char>> results;
  fsdprt_stats_t stats{};
  std::string error;
};

void runRank(ExecutionEngine &engine, const Program &prog,
             const std::vector<::fsdp::npy::Array> &inputs, fsdprt_comm_t *comm,
             int64_t rank, RankRun &out) {
  fsdprt_set_thread_comm(comm);
  std::vector<std::vector<char>> buffers;
  std::vector<Descriptor> descs;
  for (size_t i = 0; i < prog.args.size(); ++i) {
    buffers.push_back(shardInput(prog.args[i], inputs[i], rank));
    descs.push_back(Descriptor::forBuffer(buffers.back().data(),
                                          prog.args[i].type.getShape()));
  }
  size_t resultWords = 0;
  for (const Port &p : prog.results)
    resultWords += 3 + 2 * p.type.getRank();
  std::vector<int64_t> resultStruct(resultWords, 0);
  std::vector<void *> pointers;
  if (!prog.results.empty())
    pointers.push_back(resultStruct.data());
  for (Descriptor &d : descs)
    pointers.push_back(d.words.data());
  std::vector<void *> packed;
  for (void *&p : pointers)
    packed.push_back(&p);
  if (llvm::Error err =
          engine.invokePacked("_mlir_ciface_" + prog.entry, packed)) {
    out.error = llvm::toString(std::move(err));
    return;
  }
  if (fsdprt_comm_error(comm) != FSDPRT_OK) {
    out.error = fsdprt_comm_error_message(comm);
    return;
  }
  size_t w = 0;
  for (const Port &p : prog.results) {
    out.results.push_back(copyResult(p, resultStruct.data() + w));
    w += 3 + 2 * p.type.getRank();
  }
  fsdprt_comm_get_stats(comm, &out.stats);
}

/// Assembles each result from every rank's piece and writes it.
void writeOutputs(const Program &prog, const std::vector<RankRun> &runs) {
  llvm::sys::fs::create_directories(outputsDir);
  for (size_t i = 0; i < prog.results.size(); ++i) {
    const Port &p = prog.results[i];
    int64_t bytes = p.elementBytes();
    ::fsdp::npy::Array a;
    a.descr = npyDescr(p.type.getElementType());
    a.shape = p.globalType.getShape().vec();
    if (p.layout) {
      // Every rank's owned elements, in rank order: Partial(sum) results
      // are added up, replicas must agree bit for bit.
      bool partial = hasPartial(*p.layout);
      Type elem = p.type.getElementType();
      if (partial && !elem.isF32() && !elem.isF64())
        fail("result '" + p.name + "': partial sums need f32 or f64");
      a.data.assign(p.globalType.getNumElements() * bytes, 0);
      std::vector<char> written(p.globalType.getNumElements(), 0);
      for (size_t r = 0; r < runs.size(); ++r) {
        lm::LocalShard s = lm::localShard(*p.layout, a.shape, r);
        const std::vector<char> &piece = runs[r].results[i];
        forEachOwnedRun(s, a.shape, [&](int64_t so, int64_t go, int64_t n) {
          for (int64_t e = 0; e < n; ++e) {
            const char *src = piece.data() + (so + e) * bytes;
            char *dst = a.data.data() + (go + e) * bytes;
            if (partial && elem.isF32())
              *reinterpret_cast<float *>(dst) +=
                  *reinterpret_cast<const float *>(src);
            else if (partial)
              *reinterpret_cast<double *>(dst) +=
                  *reinterpret_cast<const double *>(src);
            else if (written[go + e] && std::memcmp(dst, src, bytes) != 0)
              fail("result '" + p.name + "': replicas disagree at element " +
                   llvm::Twine(go + e) + " (rank " + llvm::Twine(r) + ")");
            else
              std::memcpy(dst, src, bytes);
            written[go + e] = 1;
          }
        });
      }
    } else {
      a.data = runs[0].results[i]; // not sharded: rank 0's value
      for (size_t r = 0; writeAllRanks && r < runs.size(); ++r) {
        ::fsdp::npy::Array copy = a;
        copy.data = runs[r].results[i];
        std::string error;
        if (!::fsdp::npy::write(outputsDir + "/" + p.name + ".rank" +
                                    std::to_string(r) + ".npy",
                                copy, error))
          fail(error);
      }
    }
    std::string error;
    if (!::fsdp::npy::write(outputsDir + "/" + p.name + ".npy", a, error))
      fail(error);
  }
}

void printRankStats(int64_t rank, const fsdprt_stats_t &s) {
  llvm::outs() << "  rank " << rank << ": " << s.total_calls
               << " collectives (all_gather " << s.calls[FSDPRT_KIND_ALL_GATHER]
               << ", reduce_scatter " << s.calls[FSDPRT_KIND_REDUCE_SCATTER]
               << ", all_reduce " << s.calls[FSDPRT_KIND_ALL_REDUCE]
               << "), sent " << s.total_bytes_sent << " B, received "
               << s.total_bytes_received << " B\n";
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::ParseCommandLineOptions(argc, argv,
                              "fsdp-run: run a lowered fsdp program on "
                              "every rank of its mesh\n");
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
#ifdef FSDP_HAVE_OPENBLAS
  // Ranks are the parallelism: one BLAS thread each.
  openblas_set_num_threads(1);
#endif

  DialectRegistry registry;
  registerAllDialects(registry);
  registry.insert<mlir::fsdp::FSDPDialect>();
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  MLIRContext context(registry);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(inputFile, &context);
  if (!module)
    fail("cannot parse " + inputFile);
  Program prog = prepare(*module);

  int64_t meshSize = lm::product(prog.meshShape);
  bool mpi = backendName == "mpi";
  if (!mpi && backendName != "threads")
    fail("unknown backend '" + backendName + "' (threads or mpi)");
  if (!mpi && worldSize != 0 && worldSize != meshSize)
    fail("world size " + llvm::Twine(worldSize.getValue()) +
         " does not match the mesh size " + llvm::Twine(meshSize));
  std::vector<::fsdp::npy::Array> inputs = loadInputs(prog, meshSize);

  ExecutionEngineOptions options;
  options.transformer = makeOptimizingTransformer(2, 0, nullptr);
#ifdef FSDP_C_RUNNER_UTILS
  SmallVector<StringRef> libs = {FSDP_C_RUNNER_UTILS};
  options.sharedLibPaths = libs;
#endif
  auto engineOr = ExecutionEngine::create(*module, options);
  if (!engineOr)
    fail("JIT compilation failed: " + llvm::toString(engineOr.takeError()));
  std::unique_ptr<ExecutionEngine> engine = std::move(*engineOr);

  std::vector<const char *> names;
  for (const std::string &n : prog.axisNames)
    names.push_back(n.c_str());
  fsdprt_options_t rtOptions;
  fsdprt_options_init(&rtOptions);
  rtOptions.timeout_s = timeoutSeconds;
  rtOptions.axis_names = names.empty() ? nullptr : names.data();

  std::vector<RankRun> runs(meshSize);
  if (!mpi) {
    fsdprt_world_t *world = nullptr;
    if (fsdprt_threads_world_create(prog.meshShape.size(),
                                    prog.meshShape.data(), &rtOptions,
                                    &world) != FSDPRT_OK)
      fail("cannot create the threads world");
    std::vector<std::thread> threads;
    for (int64_t r = 0; r < meshSize; ++r) {
      fsdprt_comm_t *comm = nullptr;
      fsdprt_threads_comm(world, r, &comm);
      threads.emplace_back(runRank, std::ref(*engine), std::cref(prog),
                           std::cref(inputs), comm, r, std::ref(runs[r]));
    }
    for (auto &t : threads)
      t.join();
    fsdprt_world_destroy(world);
  } else {
    fsdprt_comm_t *comm = nullptr;
    if (fsdprt_mpi_comm_create(prog.meshShape.size(), prog.meshShape.data(),
                               &rtOptions, &comm) != FSDPRT_OK)
      fail("cannot create the MPI communicator (is the world size " +
           llvm::Twine(meshSize) + " under mpirun?)");
    int64_t rank = 0;
    fsdprt_comm_rank(comm, &rank);
    RankRun mine;
    runRank(*engine, prog, inputs, comm, rank, mine);
    if (!mine.error.empty())
      fail("rank " + llvm::Twine(rank) + ": " + mine.error);
    // Every rank gathers every result piece (bytes) so rank 0 can write.
    for (size_t i = 0; i < prog.results.size(); ++i) {
      const std::vector<char> &piece = mine.results[i];
      std::vector<char> all(piece.size() * meshSize);
      if (fsdprt_all_gather(comm, (int64_t(1) << prog.meshShape.size()) - 1,
                            piece.data(), all.data(), piece.size(),
                            FSDPRT_U8) != FSDPRT_OK)
        fail("gathering results failed: " +
             llvm::Twine(fsdprt_comm_error_message(comm)));
      for (int64_t r = 0; r < meshSize; ++r)
        runs[r].results.push_back(
            std::vector<char>(all.begin() + r * piece.size(),
                              all.begin() + (r + 1) * piece.size()));
    }
    runs[rank].stats = mine.stats;
    if (rank == 0) {
      writeOutputs(prog, runs);
      if (printStats)
        printRankStats(0, mine.stats);
    }
    fsdprt_comm_destroy(comm);
    return 0;
  }
  bool failed = false;
  for (int64_t r = 0; r < meshSize; ++r)
    if (!runs[r].error.empty()) {
      llvm::errs() << "fsdp-run: error: rank " << r << ": " << runs[r].error
                   << "\n";
      failed = true;
    }
  if (failed)
    return 1;
  writeOutputs(prog, runs);
  if (printStats) {
    llvm::outs() << "collectives and bytes moved per rank:\n";
    for (int64_t r = 0; r < meshSize; ++r)
      printRankStats(r, runs[r].stats);
  }
  return 0;
}
