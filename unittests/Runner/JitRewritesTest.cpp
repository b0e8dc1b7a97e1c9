//===- JitRewritesTest.cpp - the runner's LLVM IR rewrites ----------------===//
//
// Each rewrite of lib/Runner/JitRewrites.h on a small module: the result
// verifies, has the form the rewrite promises, and (where it matters)
// computes what the original computed, run through LLJIT.
//
//===----------------------------------------------------------------------===//

#include "JitRewrites.h"

#include "llvm/AsmParser/Parser.h"
#include "llvm/ExecutionEngine/Orc/LLJIT.h"
#include "llvm/ExecutionEngine/Orc/ThreadSafeModule.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Instructions.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

using namespace fsdp::run;
using llvm::dyn_cast;
using llvm::isa;

namespace {

std::unique_ptr<llvm::Module> parse(llvm::LLVMContext &ctx,
                                    llvm::StringRef text) {
  llvm::SMDiagnostic err;
  std::unique_ptr<llvm::Module> m = llvm::parseAssemblyString(text, err, ctx);
  if (!m) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    err.print("test", os);
    ADD_FAILURE() << msg;
  }
  return m;
}

bool verifies(const llvm::Module &m) {
  std::string msg;
  llvm::raw_string_ostream os(msg);
  bool broken = llvm::verifyModule(m, &os);
  EXPECT_FALSE(broken) << msg;
  return !broken;
}

template <typename T> int count(llvm::Function &f) {
  int n = 0;
  for (llvm::Instruction &i : llvm::instructions(f))
    n += isa<T>(i);
  return n;
}

/// Runs `_mlir_<name>(args)` of `m` in a fresh LLJIT.
void runPacked(std::unique_ptr<llvm::Module> m,
               std::unique_ptr<llvm::LLVMContext> ctx, llvm::StringRef name,
               void **args) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto jit = llvm::orc::LLJITBuilder().create();
  ASSERT_TRUE(!!jit) << llvm::toString(jit.takeError());
  ASSERT_FALSE((*jit)->addIRModule(
      llvm::orc::ThreadSafeModule(std::move(m), std::move(ctx))));
  auto sym = (*jit)->lookup(("_mlir_" + name).str());
  ASSERT_TRUE(!!sym) << llvm::toString(sym.takeError());
  sym->toPtr<void (*)(void **)>()(args);
}

// A step returning a two-field aggregate, its C interface wrapper storing
// it through the result pointer, and a segment the step calls.
constexpr const char *kStep = R"(
define { i64, i64 } @seg(i64 %a, i64 %b) {
  %s = add i64 %a, %b
  %p = mul i64 %a, %b
  %r0 = insertvalue { i64, i64 } undef, i64 %s, 0
  %r1 = insertvalue { i64, i64 } %r0, i64 %p, 1
  ret { i64, i64 } %r1
}
define { i64, i64 } @step(i64 %a, i64 %b) {
  %r = call { i64, i64 } @seg(i64 %a, i64 %b)
  %s = extractvalue { i64, i64 } %r, 0
  %p = extractvalue { i64, i64 } %r, 1
  %t = sub i64 %p, %s
  %o = insertvalue { i64, i64 } %r, i64 %t, 1
  ret { i64, i64 } %o
}
define void @_mlir_ciface_step(ptr %out, ptr %in) {
  %a = load i64, ptr %in
  %bp = getelementptr i64, ptr %in, i64 1
  %b = load i64, ptr %bp
  %r = call { i64, i64 } @step(i64 %a, i64 %b)
  store { i64, i64 } %r, ptr %out
  ret void
}
)";

/// Calls the packed wrapper of kStep's C interface on (5, 7).
std::pair<int64_t, int64_t> callStep(std::unique_ptr<llvm::Module> m,
                                     std::unique_ptr<llvm::LLVMContext> ctx) {
  int64_t in[2] = {5, 7}, out[2] = {0, 0};
  void *outPtr = out, *inPtr = in;
  void *args[] = {&outPtr, &inPtr};
  runPacked(std::move(m), std::move(ctx), "_mlir_ciface_step", args);
  return {out[0], out[1]};
}

TEST(JitRewrites, PackedWrapperCallsTheCInterface) {
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = parse(*ctx, kStep);
  addPackedWrappers(*m);
  llvm::Function *w = m->getFunction("_mlir__mlir_ciface_step");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->arg_size(), 1u);
  EXPECT_TRUE(w->getReturnType()->isVoidTy());
  ASSERT_TRUE(verifies(*m));
  EXPECT_EQ(callStep(std::move(m), std::move(ctx)),
            std::make_pair(int64_t(12), int64_t(23)));
}

TEST(JitRewrites, ReturnThroughMemoryKeepsTheValues) {
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = parse(*ctx, kStep);
  addPackedWrappers(*m);
  llvm::StringSet<> names;
  names.insert("seg");
  returnThroughMemory(*m, names);
  llvm::Function *seg = m->getFunction("seg");
  ASSERT_NE(seg, nullptr);
  EXPECT_TRUE(seg->getReturnType()->isVoidTy());
  EXPECT_EQ(seg->arg_size(), 3u);
  // The caller reads the fields from memory: no extractvalue of the call.
  EXPECT_EQ(count<llvm::ExtractValueInst>(*m->getFunction("step")), 0);
  ASSERT_TRUE(verifies(*m));
  EXPECT_EQ(callStep(std::move(m), std::move(ctx)),
            std::make_pair(int64_t(12), int64_t(23)));
}

TEST(JitRewrites, ReturnThroughMemoryLeavesOtherFunctions) {
  llvm::LLVMContext ctx;
  auto m = parse(ctx, kStep);
  returnThroughMemory(*m, llvm::StringSet<>());
  EXPECT_TRUE(m->getFunction("seg")->getReturnType()->isAggregateType());
}

TEST(JitRewrites, InlineEntriesMovesTheStepIntoItsWrapper) {
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = parse(*ctx, kStep);
  inlineEntries(*m);
  EXPECT_EQ(m->getFunction("step"), nullptr);
  llvm::Function *ciface = m->getFunction("_mlir_ciface_step");
  EXPECT_EQ(count<llvm::CallInst>(*ciface), 1); // the call of @seg only
  addPackedWrappers(*m);
  ASSERT_TRUE(verifies(*m));
  EXPECT_EQ(callStep(std::move(m), std::move(ctx)),
            std::make_pair(int64_t(12), int64_t(23)));
}

TEST(JitRewrites, ScalarizeAggregatesStoresFields) {
  auto ctx = std::make_unique<llvm::LLVMContext>();
  auto m = parse(*ctx, kStep);
  inlineEntries(*m);
  llvm::Function *ciface = m->getFunction("_mlir_ciface_step");
  scalarizeAggregates(*ciface);
  for (llvm::Instruction &i : llvm::instructions(*ciface))
    if (auto *store = dyn_cast<llvm::StoreInst>(&i))
      EXPECT_FALSE(store->getValueOperand()->getType()->isAggregateType());
  addPackedWrappers(*m);
  ASSERT_TRUE(verifies(*m));
  EXPECT_EQ(callStep(std::move(m), std::move(ctx)),
            std::make_pair(int64_t(12), int64_t(23)));
}

TEST(JitRewrites, ScalarizeAggregatesLoadsFields) {
  llvm::LLVMContext ctx;
  auto m = parse(ctx, R"(
define i64 @f(ptr %p) {
  %v = load { i64, [2 x i64] }, ptr %p
  %a = extractvalue { i64, [2 x i64] } %v, 0
  %b = extractvalue { i64, [2 x i64] } %v, 1, 1
  %s = add i64 %a, %b
  ret i64 %s
}
)");
  llvm::Function *f = m->getFunction("f");
  scalarizeAggregates(*f);
  EXPECT_EQ(count<llvm::ExtractValueInst>(*f), 0);
  for (llvm::Instruction &i : llvm::instructions(*f))
    if (auto *load = dyn_cast<llvm::LoadInst>(&i))
      EXPECT_FALSE(load->getType()->isAggregateType());
  EXPECT_TRUE(verifies(*m));
}

TEST(JitRewrites, SplitLongBlocksBoundsEveryBlock) {
  llvm::LLVMContext ctx;
  std::string text = "define i64 @f(i64 %x) {\n  %slot = alloca i64\n"
                     "  %v0 = add i64 %x, 1\n";
  for (int i = 1; i < 600; ++i)
    text += "  %v" + std::to_string(i) + " = add i64 %v" +
            std::to_string(i - 1) + ", 1\n";
  text += "  store i64 %v599, ptr %slot\n  %r = load i64, ptr %slot\n"
          "  ret i64 %r\n}\n";
  auto m = parse(ctx, text);
  llvm::Function *f = m->getFunction("f");
  splitLongBlocks(*f, 256);
  EXPECT_GE(f->size(), 3u);
  for (llvm::BasicBlock &bb : *f)
    EXPECT_LE(bb.size(), 257u); // a piece plus its branch
  EXPECT_TRUE(isa<llvm::AllocaInst>(f->getEntryBlock().front()));
  EXPECT_TRUE(verifies(*m));
}

} // namespace

namespace {

/// The functions `caller` calls, in order.
std::vector<std::string> callees(llvm::Function &caller) {
  std::vector<std::string> names;
  for (llvm::Instruction &i : llvm::instructions(caller))
    if (auto *call = dyn_cast<llvm::CallInst>(&i))
      names.push_back(call->getCalledFunction()->getName().str());
  return names;
}

TEST(GatherConstructors, CallsThemByPriority) {
  llvm::LLVMContext ctx;
  auto m = parse(ctx, R"(
    @llvm.global_ctors = appending global [3 x { i32, ptr, ptr }] [
      { i32, ptr, ptr } { i32 20, ptr @late, ptr null },
      { i32, ptr, ptr } { i32 10, ptr @early, ptr null },
      { i32, ptr, ptr } { i32 20, ptr @later, ptr null }]
    @llvm.global_dtors = appending global [2 x { i32, ptr, ptr }] [
      { i32, ptr, ptr } { i32 10, ptr @d1, ptr null },
      { i32, ptr, ptr } { i32 20, ptr @d2, ptr null }]
    define internal void @early() { ret void }
    define internal void @late() { ret void }
    define internal void @later() { ret void }
    define internal void @d1() { ret void }
    define internal void @d2() { ret void }
  )");
  ASSERT_TRUE(m);
  gatherConstructors(*m);
  ASSERT_TRUE(verifies(*m));
  EXPECT_FALSE(m->getGlobalVariable("llvm.global_ctors"));
  EXPECT_FALSE(m->getGlobalVariable("llvm.global_dtors"));
  llvm::Function *ctors = m->getFunction(kConstructorsFunction);
  llvm::Function *dtors = m->getFunction(kDestructorsFunction);
  ASSERT_TRUE(ctors && dtors);
  EXPECT_EQ(callees(*ctors),
            (std::vector<std::string>{"early", "late", "later"}));
  EXPECT_EQ(callees(*dtors), (std::vector<std::string>{"d2", "d1"}));
}

TEST(GatherConstructors, NothingWithoutThem) {
  llvm::LLVMContext ctx;
  auto m = parse(ctx, "define void @f() { ret void }");
  ASSERT_TRUE(m);
  gatherConstructors(*m);
  EXPECT_FALSE(m->getFunction(kConstructorsFunction));
  EXPECT_FALSE(m->getFunction(kDestructorsFunction));
}

} // namespace
