//===- JitRewrites.cpp - LLVM IR rewrites before the JIT compiles ---------===//

#include "JitRewrites.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/IR/Constants.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/InstIterator.h"
#include "llvm/IR/Module.h"
#include "llvm/Transforms/Utils/Local.h"

#include <algorithm>
#include <cstring>

using llvm::ArrayRef;
using llvm::cast;
using llvm::dyn_cast;
using llvm::isa;
using llvm::SmallVector;

namespace fsdp::run {

namespace {

/// Moves the body of the callee of `call`, which has no other caller,
/// into the caller at the call: no copy, linear in the callee's size.
void inlineBySplice(llvm::CallInst *call) {
  llvm::Function *callee = call->getCalledFunction();
  llvm::Function *caller = call->getFunction();
  llvm::BasicBlock *head = call->getParent();
  llvm::BasicBlock *tail = head->splitBasicBlock(call);
  for (auto [formal, actual] : llvm::zip(callee->args(), call->args()))
    formal.replaceAllUsesWith(actual);
  llvm::BasicBlock *body = &callee->getEntryBlock();
  llvm::BasicBlock &entry = caller->getEntryBlock();
  for (llvm::Instruction &i : llvm::make_early_inc_range(*body))
    if (auto *alloca = dyn_cast<llvm::AllocaInst>(&i);
        alloca && alloca->isStaticAlloca())
      alloca->moveBefore(entry, entry.getFirstInsertionPt());
  SmallVector<llvm::ReturnInst *> returns;
  for (llvm::BasicBlock &bb : *callee)
    if (auto *ret = dyn_cast<llvm::ReturnInst>(bb.getTerminator()))
      returns.push_back(ret);
  caller->splice(tail->getIterator(), callee);
  head->getTerminator()->setSuccessor(0, body);
  if (!call->getType()->isVoidTy()) {
    llvm::Value *result;
    if (returns.size() == 1) {
      result = returns.front()->getReturnValue();
    } else {
      auto *phi = llvm::PHINode::Create(call->getType(), returns.size(), "",
                                        tail->begin());
      for (llvm::ReturnInst *ret : returns)
        phi->addIncoming(ret->getReturnValue(), ret->getParent());
      result = phi;
    }
    call->replaceAllUsesWith(result);
  }
  for (llvm::ReturnInst *ret : returns) {
    llvm::BranchInst::Create(tail, ret->getIterator());
    ret->eraseFromParent();
  }
  call->eraseFromParent();
  callee->eraseFromParent();
}

/// Stores the aggregate `v` field by field through `ptr` (of type
/// `type`, at `path`): the fields of an insertvalue chain directly, in the
/// order they were inserted, the others through extractvalue.
void storeFields(llvm::IRBuilder<> &b, llvm::Value *v, llvm::Type *type,
                 llvm::Value *ptr, SmallVector<unsigned> path) {
  if (!v->getType()->isAggregateType()) {
    SmallVector<llvm::Value *> indices{b.getInt32(0)};
    for (unsigned i : path)
      indices.push_back(b.getInt32(i));
    b.CreateStore(v,
                  path.empty() ? ptr : b.CreateInBoundsGEP(type, ptr, indices));
    return;
  }
  if (isa<llvm::UndefValue>(v)) // and poison: nothing defined to store
    return;
  if (isa<llvm::InsertValueInst>(v)) {
    SmallVector<llvm::InsertValueInst *> chain;
    llvm::Value *base = v;
    while (auto *insert = dyn_cast<llvm::InsertValueInst>(base)) {
      chain.push_back(insert);
      base = insert->getAggregateOperand();
    }
    storeFields(b, base, type, ptr, path);
    for (llvm::InsertValueInst *insert : llvm::reverse(chain)) {
      SmallVector<unsigned> sub = path;
      llvm::append_range(sub, insert->getIndices());
      storeFields(b, insert->getInsertedValueOperand(), type, ptr, sub);
    }
    return;
  }
  unsigned n = isa<llvm::StructType>(v->getType())
                   ? v->getType()->getStructNumElements()
                   : v->getType()->getArrayNumElements();
  for (unsigned i = 0; i < n; ++i) {
    SmallVector<unsigned> sub = path;
    sub.push_back(i);
    llvm::Value *field = nullptr;
    if (auto *c = dyn_cast<llvm::Constant>(v))
      field = c->getAggregateElement(i);
    else
      field = b.CreateExtractValue(v, i);
    storeFields(b, field, type, ptr, sub);
  }
}

/// The value an extractvalue reads from an insertvalue chain, or null.
llvm::Value *insertedValue(llvm::ExtractValueInst *extract) {
  llvm::Value *v = extract->getAggregateOperand();
  SmallVector<unsigned> path(extract->getIndices());
  // Descriptors are short chains; the bound keeps this linear.
  for (int steps = 0; steps < 64; ++steps) {
    auto *insert = dyn_cast<llvm::InsertValueInst>(v);
    if (!insert)
      return nullptr;
    ArrayRef<unsigned> at = insert->getIndices();
    size_t common = std::min(at.size(), path.size());
    if (!llvm::equal(at.take_front(common),
                     ArrayRef(path).take_front(common))) {
      v = insert->getAggregateOperand();
      continue;
    }
    if (at.size() > path.size())
      return nullptr; // reads an aggregate that holds the inserted field
    v = insert->getInsertedValueOperand();
    path.erase(path.begin(), path.begin() + at.size());
    if (path.empty())
      return v;
  }
  return nullptr;
}

/// A copy of `f`'s signature returning void and taking a pointer to the
/// result first; `f`'s body moves into it and its returns become stores.
llvm::Function *voidReturningClone(llvm::Function *f) {
  llvm::LLVMContext &ctx = f->getContext();
  llvm::IRBuilder<> b(ctx);
  SmallVector<llvm::Type *> params{b.getPtrTy()};
  llvm::append_range(params, f->getFunctionType()->params());
  auto *nf = llvm::Function::Create(
      llvm::FunctionType::get(b.getVoidTy(), params, false), f->getLinkage(),
      f->getAddressSpace(), "", f->getParent());
  nf->copyAttributesFrom(f);
  SmallVector<llvm::AttributeSet> args{llvm::AttributeSet()};
  for (unsigned i = 0; i < f->arg_size(); ++i)
    args.push_back(f->getAttributes().getParamAttrs(i));
  nf->setAttributes(llvm::AttributeList::get(
      ctx, f->getAttributes().getFnAttrs(), llvm::AttributeSet(), args));
  nf->takeName(f);
  nf->splice(nf->begin(), f);
  llvm::Argument *out = nf->getArg(0);
  for (auto [from, to] : llvm::zip(f->args(), llvm::drop_begin(nf->args())))
    from.replaceAllUsesWith(&to);
  for (llvm::BasicBlock &bb : *nf)
    if (auto *ret = dyn_cast<llvm::ReturnInst>(bb.getTerminator())) {
      b.SetInsertPoint(ret);
      b.CreateStore(ret->getReturnValue(), out);
      b.CreateRetVoid();
      ret->eraseFromParent();
    }
  return nf;
}

/// Replaces the uses of the aggregate `v` (read from `slot` of type
/// `resultType` at `path`): fields used through (nested) extractvalues
/// become loads; any other use reads the whole aggregate.
void replaceByLoads(llvm::IRBuilder<> &b, llvm::Value *v,
                    llvm::Type *resultType, llvm::Value *slot,
                    const SmallVector<unsigned> &path) {
  auto load = [&](llvm::Type *type, ArrayRef<unsigned> at) -> llvm::Value * {
    if (at.empty())
      return b.CreateLoad(type, slot);
    SmallVector<llvm::Value *> indices{b.getInt32(0)};
    for (unsigned i : at)
      indices.push_back(b.getInt32(i));
    return b.CreateLoad(type, b.CreateInBoundsGEP(resultType, slot, indices));
  };
  llvm::Value *whole = nullptr;
  for (llvm::Use &use : llvm::make_early_inc_range(v->uses())) {
    auto *ev = dyn_cast<llvm::ExtractValueInst>(use.getUser());
    if (!ev) {
      if (!whole)
        whole = load(v->getType(), path);
      use.set(whole);
      continue;
    }
    SmallVector<unsigned> sub = path;
    llvm::append_range(sub, ev->getIndices());
    if (ev->getType()->isAggregateType())
      replaceByLoads(b, ev, resultType, slot, sub);
    else
      ev->replaceAllUsesWith(load(ev->getType(), sub));
    ev->eraseFromParent();
  }
}

/// Whether `f` returns an aggregate and is only called directly.
bool returnsAggregateToCalls(llvm::Function &f) {
  return !f.isDeclaration() && f.getReturnType()->isAggregateType() &&
         !f.isVarArg() && llvm::all_of(f.users(), [&](llvm::User *u) {
           auto *call = dyn_cast<llvm::CallInst>(u);
           return call && call->getCalledFunction() == &f;
         });
}

/// The functions of `llvm.global_ctors` or `llvm.global_dtors` by
/// priority, ascending; the array is erased.
SmallVector<llvm::Function *> takeStructors(llvm::Module &m,
                                            llvm::StringRef array) {
  SmallVector<std::pair<uint64_t, llvm::Function *>> entries;
  llvm::GlobalVariable *gv = m.getGlobalVariable(array);
  if (!gv)
    return {};
  if (gv->hasInitializer())
    if (auto *init = dyn_cast<llvm::ConstantArray>(gv->getInitializer()))
      for (llvm::Use &op : init->operands()) {
        auto *entry = cast<llvm::ConstantStruct>(op.get());
        auto *priority = cast<llvm::ConstantInt>(entry->getOperand(0));
        if (auto *f = dyn_cast<llvm::Function>(
                entry->getOperand(1)->stripPointerCasts()))
          entries.push_back({priority->getZExtValue(), f});
      }
  gv->eraseFromParent();
  llvm::stable_sort(
      entries, [](const auto &a, const auto &b) { return a.first < b.first; });
  SmallVector<llvm::Function *> fns;
  for (auto &e : entries)
    fns.push_back(e.second);
  return fns;
}

/// Defines `void name()` calling `fns` in order.
void defineCaller(llvm::Module &m, llvm::StringRef name,
                  ArrayRef<llvm::Function *> fns) {
  auto *type = llvm::FunctionType::get(llvm::Type::getVoidTy(m.getContext()),
                                       /*isVarArg=*/false);
  auto *caller =
      llvm::Function::Create(type, llvm::GlobalValue::ExternalLinkage, name, m);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(m.getContext(), "", caller));
  for (llvm::Function *f : fns)
    b.CreateCall(f->getFunctionType(), f);
  b.CreateRetVoid();
}

} // namespace

void gatherConstructors(llvm::Module &m) {
  SmallVector<llvm::Function *> ctors = takeStructors(m, "llvm.global_ctors");
  SmallVector<llvm::Function *> dtors = takeStructors(m, "llvm.global_dtors");
  std::reverse(dtors.begin(), dtors.end());
  if (!ctors.empty())
    defineCaller(m, kConstructorsFunction, ctors);
  if (!dtors.empty())
    defineCaller(m, kDestructorsFunction, dtors);
}

void addPackedWrappers(llvm::Module &m) {
  SmallVector<llvm::Function *> entries;
  for (llvm::Function &f : m)
    if (!f.isDeclaration() && f.getName().starts_with("_mlir_ciface_"))
      entries.push_back(&f);
  llvm::LLVMContext &ctx = m.getContext();
  llvm::IRBuilder<> b(ctx);
  for (llvm::Function *f : entries) {
    auto *type = llvm::FunctionType::get(b.getVoidTy(), b.getPtrTy(), false);
    auto *wrapper = llvm::Function::Create(
        type, llvm::GlobalValue::ExternalLinkage, "_mlir_" + f->getName(), m);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", wrapper));
    llvm::Value *list = wrapper->getArg(0);
    SmallVector<llvm::Value *> args;
    for (auto [i, arg] : llvm::enumerate(f->args())) {
      llvm::Value *slot = b.CreateGEP(b.getPtrTy(), list, b.getInt64(i));
      llvm::Value *ptr = b.CreateLoad(b.getPtrTy(), slot);
      args.push_back(b.CreateLoad(arg.getType(), ptr));
    }
    llvm::Value *result = b.CreateCall(f, args);
    if (!result->getType()->isVoidTy()) {
      llvm::Value *slot =
          b.CreateGEP(b.getPtrTy(), list, b.getInt64(f->arg_size()));
      b.CreateStore(result, b.CreateLoad(b.getPtrTy(), slot));
    }
    b.CreateRetVoid();
  }
}

/// At -O0, an instruction FastISel cannot select sends its whole block to
/// SelectionDAG, whose cost grows faster than the block. Splits from the
/// end of a block, so that each split moves one piece.
void splitLongBlocks(llvm::Function &f, unsigned limit) {
  SmallVector<llvm::BasicBlock *> work;
  for (llvm::BasicBlock &bb : f)
    work.push_back(&bb);
  SmallVector<llvm::Instruction *> cuts;
  for (llvm::BasicBlock *bb : work) {
    // Allocas and phis stay in their block (the entry's are static).
    llvm::Instruction *start = nullptr;
    for (llvm::Instruction &i : *bb)
      if (isa<llvm::AllocaInst, llvm::PHINode>(i))
        start = nullptr;
      else if (!start)
        start = &i;
    cuts.clear();
    unsigned count = 0;
    for (llvm::Instruction *i = start; i && !i->isTerminator();
         i = i->getNextNode())
      if (++count == limit) {
        cuts.push_back(i);
        count = 0;
      }
    for (llvm::Instruction *cut : llvm::reverse(cuts))
      bb->splitBasicBlock(cut);
  }
}

/// -O0's FastISel selects neither a call that returns a large aggregate
/// nor an extractvalue of one (the segments return every result's
/// descriptor in one struct), and sends their whole block to SelectionDAG.
void returnThroughMemory(llvm::Module &m, const llvm::StringSet<> &names) {
  llvm::IRBuilder<> b(m.getContext());
  SmallVector<llvm::Function *> work;
  for (llvm::Function &f : m)
    if (names.contains(f.getName()) && returnsAggregateToCalls(f))
      work.push_back(&f);
  for (llvm::Function *f : work) {
    llvm::Type *resultType = f->getReturnType();
    llvm::Function *nf = voidReturningClone(f);
    // One result slot per caller: every field is read right after the call.
    llvm::DenseMap<llvm::Function *, llvm::AllocaInst *> slots;
    for (llvm::User *u : llvm::make_early_inc_range(f->users())) {
      auto *call = cast<llvm::CallInst>(u);
      llvm::Function *caller = call->getFunction();
      llvm::AllocaInst *&slot = slots[caller];
      if (!slot) {
        b.SetInsertPoint(&caller->getEntryBlock(),
                         caller->getEntryBlock().begin());
        slot = b.CreateAlloca(resultType);
      }
      b.SetInsertPoint(call);
      SmallVector<llvm::Value *> args{slot};
      llvm::append_range(args, call->args());
      llvm::CallInst *nc = b.CreateCall(nf, args);
      nc->setCallingConv(call->getCallingConv());
      b.SetInsertPoint(nc->getNextNode());
      replaceByLoads(b, call, resultType, slot, {});
      call->eraseFromParent();
    }
    f->eraseFromParent();
  }
}

/// The entry takes every memref as 3 + 2 x rank scalars and returns all
/// results as one aggregate; the wrapper loads the arguments and stores the
/// aggregate. Code generation of those calls and of the aggregate return
/// grows faster than their size; once inlined (and scalarizeAggregates has
/// run), every field is one load or one store.
void inlineEntries(llvm::Module &m) {
  SmallVector<llvm::CallInst *> calls;
  for (llvm::Function &f : m) {
    if (f.isDeclaration() || !f.getName().starts_with("_mlir_ciface_"))
      continue;
    llvm::Function *entry =
        m.getFunction(f.getName().drop_front(strlen("_mlir_ciface_")));
    if (!entry || entry->isDeclaration() || entry->isVarArg() ||
        !entry->hasOneUse())
      continue;
    auto *call = dyn_cast<llvm::CallInst>(entry->user_back());
    if (call && call->getFunction() == &f && call->getCalledOperand() == entry)
      calls.push_back(call);
  }
  for (llvm::CallInst *call : calls)
    inlineBySplice(call);
}

/// -O0's FastISel selects field loads and stores; an aggregate value sends
/// its block to SelectionDAG.
void scalarizeAggregates(llvm::Function &f) {
  SmallVector<llvm::StoreInst *> stores;
  SmallVector<llvm::LoadInst *> loads;
  for (llvm::Instruction &i : llvm::instructions(f))
    if (auto *store = dyn_cast<llvm::StoreInst>(&i);
        store && store->isSimple() &&
        store->getValueOperand()->getType()->isAggregateType())
      stores.push_back(store);
  llvm::IRBuilder<> b(f.getContext());
  for (llvm::StoreInst *store : stores) {
    b.SetInsertPoint(store);
    llvm::Value *v = store->getValueOperand();
    storeFields(b, v, v->getType(), store->getPointerOperand(), {});
    store->eraseFromParent();
    llvm::RecursivelyDeleteTriviallyDeadInstructions(v);
  }
  // Fields of descriptors built in the function are read directly.
  SmallVector<llvm::ExtractValueInst *> extracts;
  for (llvm::Instruction &i : llvm::instructions(f))
    if (auto *extract = dyn_cast<llvm::ExtractValueInst>(&i))
      extracts.push_back(extract);
  SmallVector<llvm::WeakTrackingVH> dead;
  for (llvm::ExtractValueInst *extract : extracts)
    if (llvm::Value *v = insertedValue(extract)) {
      dead.push_back(extract->getAggregateOperand());
      extract->replaceAllUsesWith(v);
      extract->eraseFromParent();
    }
  llvm::RecursivelyDeleteTriviallyDeadInstructionsPermissive(dead);
  for (llvm::Instruction &i : llvm::instructions(f))
    if (auto *load = dyn_cast<llvm::LoadInst>(&i);
        load && load->isSimple() && load->getType()->isAggregateType())
      loads.push_back(load);
  while (!loads.empty()) {
    llvm::LoadInst *load = loads.pop_back_val();
    if (!llvm::all_of(load->users(), [](llvm::User *u) {
          return isa<llvm::ExtractValueInst>(u);
        }))
      continue;
    b.SetInsertPoint(load);
    for (llvm::User *u : llvm::make_early_inc_range(load->users())) {
      auto *extract = cast<llvm::ExtractValueInst>(u);
      SmallVector<llvm::Value *> indices{b.getInt32(0)};
      for (unsigned i : extract->getIndices())
        indices.push_back(b.getInt32(i));
      llvm::LoadInst *field =
          b.CreateLoad(extract->getType(),
                       b.CreateInBoundsGEP(load->getType(),
                                           load->getPointerOperand(), indices));
      if (field->getType()->isAggregateType())
        loads.push_back(field);
      extract->replaceAllUsesWith(field);
      extract->eraseFromParent();
    }
    load->eraseFromParent();
  }
}

} // namespace fsdp::run
