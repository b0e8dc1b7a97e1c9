//===- PassOptions.h - fixed-value options of the fsdp passes ---*- C++ -*-===//
//
// The enums behind the options that take one of a fixed set of values, and
// their command-line spellings. Each pass option (Passes.td) and the
// matching `fsdp-pipeline` option use the same FSDP_*_VALUES list, so a value
// is spelled, accepted and documented in one place. The quantization
// formats are not listed here: their parser takes them from the QuantFormat
// enum (FSDPBase.td).
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_TRANSFORMS_PASSOPTIONS_H
#define FSDP_DIALECT_FSDP_TRANSFORMS_PASSOPTIONS_H

#include "fsdp/Dialect/FSDP/IR/FSDPAttrs.h"
#include "fsdp/Dialect/FSDP/IR/QuantFormat.h"

#include "mlir/IR/Types.h"
#include "llvm/Support/CommandLine.h"

#include <optional>

namespace mlir::fsdp {

/// The command-line parser of every enum option: like llvm::cl::parser, but
/// a value it does not know is reported with the accepted ones.
template <typename T>
class EnumOptionParser : public llvm::cl::generic_parser_base {
public:
  struct OptionInfo : public GenericOptionInfo {
    OptionInfo(StringRef name, T value, StringRef help)
        : GenericOptionInfo(name, help), V(value) {}
    llvm::cl::OptionValue<T> V;
  };
  SmallVector<OptionInfo, 8> Values;
  using parser_data_type = T;

  explicit EnumOptionParser(llvm::cl::Option &owner)
      : generic_parser_base(owner) {}

  unsigned getNumOptions() const override { return Values.size(); }
  StringRef getOption(unsigned n) const override { return Values[n].Name; }
  StringRef getDescription(unsigned n) const override {
    return Values[n].HelpStr;
  }
  const llvm::cl::GenericOptionValue &
  getOptionValue(unsigned n) const override {
    return Values[n].V;
  }

  bool parse(llvm::cl::Option &option, StringRef argName, StringRef arg,
             T &value) {
    StringRef text = Owner.hasArgStr() ? arg : argName;
    // An empty value selects "none" or "layout" (keep), where that exists.
    for (const OptionInfo &info : Values)
      if (info.Name == text ||
          (text.empty() && (info.Name == "none" || info.Name == "layout"))) {
        value = info.V.getValue();
        return false;
      }
    std::string accepted;
    for (const OptionInfo &info : Values)
      accepted += (accepted.empty() ? "" : ", ") + info.Name.str();
    llvm::errs() << "error: option " << option.ArgStr << ": '" << text
                 << "' is not one of " << accepted << "\n";
    return true;
  }

  template <typename V>
  void addLiteralOption(StringRef name, const V &value, StringRef help) {
    Values.emplace_back(name, static_cast<T>(value), help);
    llvm::cl::AddLiteralOption(Owner, name);
  }
  void removeLiteralOption(StringRef name) {
    for (unsigned i = 0; i < Values.size(); ++i)
      if (Values[i].Name == name) {
        Values.erase(Values.begin() + i);
        return;
      }
  }
};

/// fsdp-partition reduce-op: how gradients are reduced.
#define FSDP_GRADIENT_REDUCE_VALUES                                            \
  ::llvm::cl::values(clEnumValN(::mlir::fsdp::ReduceKind::avg, "avg",          \
                                "mean over the data-parallel ranks"),          \
                     clEnumValN(::mlir::fsdp::ReduceKind::sum, "sum", "sum"))

/// fsdp-partition uneven-policy: keep each layout's policy or override it.
enum class PolicyOverride { layout, ceil, balanced };
#define FSDP_POLICY_OVERRIDE_VALUES                                            \
  ::llvm::cl::values(                                                          \
      clEnumValN(::mlir::fsdp::PolicyOverride::layout, "layout",               \
                 "keep every layout's own policy"),                            \
      clEnumValN(::mlir::fsdp::PolicyOverride::ceil, "ceil",                   \
                 "ceil(n/k) rows per rank, trailing ranks hold fewer"),        \
      clEnumValN(::mlir::fsdp::PolicyOverride::balanced, "balanced",           \
                 "the first n%k ranks hold one extra row"))

/// fsdp-partition param-dtype / reduce-dtype: the float types the runtime
/// moves (fsdprt dtypes), or none (keep the parameter's type).
enum class FloatDtype { none, f32, f64, f16, bf16 };
#define FSDP_FLOAT_DTYPE_VALUES                                                \
  ::llvm::cl::values(                                                          \
      clEnumValN(::mlir::fsdp::FloatDtype::none, "none",                       \
                 "keep the element type"),                                     \
      clEnumValN(::mlir::fsdp::FloatDtype::f32, "f32", "32-bit float"),        \
      clEnumValN(::mlir::fsdp::FloatDtype::f64, "f64", "64-bit float"),        \
      clEnumValN(::mlir::fsdp::FloatDtype::f16, "f16", "16-bit IEEE float"),   \
      clEnumValN(::mlir::fsdp::FloatDtype::bf16, "bf16", "bfloat16"))
/// The element type of a FloatDtype; null for none.
Type toType(FloatDtype dtype, MLIRContext *ctx);

/// fsdp-autocast dtype: the 16-bit float that contractions read and
/// activations are stored in.
enum class AutocastDtype { bf16, f16 };
#define FSDP_AUTOCAST_DTYPE_VALUES                                             \
  ::llvm::cl::values(                                                          \
      clEnumValN(::mlir::fsdp::AutocastDtype::bf16, "bf16", "bfloat16"),       \
      clEnumValN(::mlir::fsdp::AutocastDtype::f16, "f16",                      \
                 "16-bit IEEE float"))

/// fsdp-pipeline mixed-precision: what a 16-bit param-dtype changes.
enum class MixedPrecisionMode { compute, traffic };
#define FSDP_MIXED_PRECISION_VALUES                                            \
  ::llvm::cl::values(                                                          \
      clEnumValN(::mlir::fsdp::MixedPrecisionMode::compute, "compute",         \
                 "gathers and compute in param-dtype (fsdp-autocast)"),        \
      clEnumValN(::mlir::fsdp::MixedPrecisionMode::traffic, "traffic",         \
                 "gathers in param-dtype, compute in the parameter's type"))

/// fsdp-bucket-collectives mode.
enum class BucketMode { unit, greedy, none };
#define FSDP_BUCKET_MODE_VALUES                                                \
  ::llvm::cl::values(                                                          \
      clEnumValN(::mlir::fsdp::BucketMode::unit, "unit",                       \
                 "one bucket per FSDP unit and phase"),                        \
      clEnumValN(::mlir::fsdp::BucketMode::greedy, "greedy",                   \
                 "program order up to the limits"),                            \
      clEnumValN(::mlir::fsdp::BucketMode::none, "none", "no bucketing"))

/// fsdp-optimizer optimizer (fsdp-pipeline optimizer adds `none`).
enum class OptimizerKind { none, sgd, adamw };
#define FSDP_OPTIMIZER_CASES                                                   \
  clEnumValN(::mlir::fsdp::OptimizerKind::sgd, "sgd",                          \
             "torch.optim.SGD (momentum, dampening, nesterov, weight decay)"), \
      clEnumValN(::mlir::fsdp::OptimizerKind::adamw, "adamw",                  \
                 "torch.optim.AdamW (bias correction, decoupled decay)")
#define FSDP_OPTIMIZER_VALUES ::llvm::cl::values(FSDP_OPTIMIZER_CASES)
#define FSDP_PIPELINE_OPTIMIZER_VALUES                                         \
  ::llvm::cl::values(clEnumValN(::mlir::fsdp::OptimizerKind::none, "none",     \
                                "no update (the gradients are the results)"),  \
                     FSDP_OPTIMIZER_CASES)

/// fsdp-comm-report format.
enum class ReportFormat { text, json };
#define FSDP_REPORT_FORMAT_VALUES                                              \
  ::llvm::cl::values(                                                          \
      clEnumValN(::mlir::fsdp::ReportFormat::text, "text", "text"),            \
      clEnumValN(::mlir::fsdp::ReportFormat::json, "json", "JSON"))

} // namespace mlir::fsdp

// Every enum option parses with EnumOptionParser.
#define FSDP_ENUM_OPTION_PARSER(T)                                             \
  template <>                                                                  \
  class llvm::cl::parser<T> : public ::mlir::fsdp::EnumOptionParser<T> {       \
  public:                                                                      \
    using EnumOptionParser::EnumOptionParser;                                  \
  };
FSDP_ENUM_OPTION_PARSER(::mlir::fsdp::ReduceKind)
FSDP_ENUM_OPTION_PARSER(::mlir::fsdp::PolicyOverride)
FSDP_ENUM_OPTION_PARSER(::mlir::fsdp::FloatDtype)
FSDP_ENUM_OPTION_PARSER(::mlir::fsdp::BucketMode)
FSDP_ENUM_OPTION_PARSER(::mlir::fsdp::ReportFormat)
FSDP_ENUM_OPTION_PARSER(::mlir::fsdp::OptimizerKind)
#undef FSDP_ENUM_OPTION_PARSER

/// The value of fsdp-pipeline's `quantize` (a format, or none): LLVM keeps an
/// option value of class type only through a specialization like this one.
template <>
struct llvm::cl::OptionValue<std::optional<::mlir::fsdp::QuantFormat>> final
    : OptionValueCopy<std::optional<::mlir::fsdp::QuantFormat>> {
  using WrapperType = std::optional<::mlir::fsdp::QuantFormat>;
  OptionValue() = default;
  OptionValue(const WrapperType &value) { setValue(value); }
  OptionValue &operator=(const WrapperType &value) {
    setValue(value);
    return *this;
  }
};

/// fsdp-quantize-gathers format: every QuantFormat, as the IR spells it.
template <>
class llvm::cl::parser<::mlir::fsdp::QuantFormat>
    : public ::mlir::fsdp::EnumOptionParser<::mlir::fsdp::QuantFormat> {
public:
  using EnumOptionParser::EnumOptionParser;
  void initialize() {
    for (::mlir::fsdp::QuantFormat format : ::mlir::fsdp::allQuantFormats())
      addLiteralOption(::mlir::fsdp::stringifyQuantFormat(format), format, "");
  }
};

/// fsdp-pipeline quantize: none, then every QuantFormat.
template <>
class llvm::cl::parser<std::optional<::mlir::fsdp::QuantFormat>>
    : public ::mlir::fsdp::EnumOptionParser<
          std::optional<::mlir::fsdp::QuantFormat>> {
public:
  using EnumOptionParser::EnumOptionParser;
  void initialize() {
    using Value = std::optional<::mlir::fsdp::QuantFormat>;
    addLiteralOption("none", Value(), "gather in the parameter's type");
    for (::mlir::fsdp::QuantFormat format : ::mlir::fsdp::allQuantFormats())
      addLiteralOption(::mlir::fsdp::stringifyQuantFormat(format),
                       Value(format), "");
  }
};

#endif
