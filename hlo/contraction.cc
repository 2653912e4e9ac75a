#include "hlo/contraction.h"

#include <string>
#include <unordered_map>
#include <utility>

#include "hlo/ops.h"

namespace tpumesh::hlo {
namespace {

struct Use {
  const Op* op = nullptr;
  const Block* block = nullptr;
  size_t operand = 0;
};

class Planner {
 public:
  explicit Planner(const Module& m) : m_(m) {
    const size_t n = static_cast<size_t>(m.num_values);
    uses_.resize(n);
    producer_.assign(n, nullptr);
    plan_.assign(n, Product::kRounded);
    for (const Func& f : m.funcs) {
      if (f.body.blocks.size() == 1) body_of_[&f.body.blocks[0]] = &f;
      Index(f.body, true);
    }
  }

  std::vector<Product> Plan() {
    // Each multiply's consumers (one per inlined copy), then the consumers'
    // choices (an add takes its left product when both are), then the marks.
    std::vector<std::vector<Use>> consumers(multiplies_.size());
    std::unordered_map<const Op*, size_t> fused_operand;  // add/subtract -> operand index
    for (size_t i = 0; i < multiplies_.size(); ++i) {
      const auto& [mul, block] = multiplies_[i];
      if (!Consumers(mul->results[0], block, consumers[i], 0)) consumers[i].clear();
      for (const Use& u : consumers[i]) {
        if (!AddOrSubtract(*u.op) || !SameType(*mul, *u.op)) continue;
        auto [it, fresh] = fused_operand.emplace(u.op, u.operand);
        if (!fresh && u.operand < it->second) it->second = u.operand;
      }
    }
    for (size_t i = 0; i < multiplies_.size(); ++i) {
      const auto& [mul, block] = multiplies_[i];
      const auto& cs = consumers[i];
      if (cs.empty()) continue;
      bool fused = true, folded = true;
      for (const Use& u : cs) {
        auto it = fused_operand.find(u.op);
        fused = fused && SameType(*mul, *u.op) && it != fused_operand.end() && it->second == u.operand;
        folded = folded && SameType(*mul, *u.op) && u.op->name == "stablehlo.multiply" &&
                 SplatConstant(u.op->operands[1 - u.operand], use_block_.at(u.op), 0);
      }
      const bool c0 = SplatConstant(mul->operands[0], block, 0), c1 = SplatConstant(mul->operands[1], block, 0);
      Product& mark = plan_[static_cast<size_t>(mul->results[0])];
      if (fused) mark = Product::kFused;
      else if (folded && c0 != c1) mark = c0 ? Product::kFoldedLhs : Product::kFoldedRhs;
    }
    return std::move(plan_);
  }

 private:
  static constexpr int kMaxDepth = 64;        // calls followed
  static constexpr size_t kMaxCopies = 256;   // inlined copies of one value

  // Records producers, uses and call sites everywhere; multiplies only in
  // kernel blocks (function bodies, control ops' regions).
  void Index(const Region& r, bool kernel) {
    for (const Block& b : r.blocks)
      for (const Op& op : b.ops) {
        use_block_[&op] = &b;
        for (int v : op.results) producer_[static_cast<size_t>(v)] = &op;
        for (size_t k = 0; k < op.operands.size(); ++k)
          uses_[static_cast<size_t>(op.operands[k])].push_back({&op, &b, k});
        const OpEntry* e = EntryOf(op);
        if (e && e->run == Run::kCall) call_sites_[op.callee].push_back({&op, &b, 0});
        if (kernel && op.name == "stablehlo.multiply" && op.results.size() == 1 &&
            (op.result_types[0].element == ElementType::kF32 || op.result_types[0].element == ElementType::kF64))
          multiplies_.emplace_back(&op, &b);
        for (const Region& inner : op.regions) Index(inner, kernel && e && e->op_class == OpClass::kControl);
      }
  }

  // The places a private function is called from (none for a public one:
  // its callers are outside the module).
  const std::vector<Use>& CallSites(const Func& f) const {
    static const std::vector<Use> kNone;
    auto it = call_sites_.find(f.name);
    return f.is_public || it == call_sites_.end() ? kNone : it->second;
  }

  // Appends the uses of value v (defined in `block`) in the same kernel
  // once the calls are inlined: one per inlined copy (a value returned by
  // a function called from n places has n). False when some copy of v has
  // another use or leaves the kernel.
  bool Consumers(int v, const Block* block, std::vector<Use>& out, int depth) const {
    const auto& us = uses_[static_cast<size_t>(v)];
    if (depth > kMaxDepth || out.size() >= kMaxCopies || us.size() != 1 || us[0].block != block) return false;
    const Use& u = us[0];
    const OpEntry* e = EntryOf(*u.op);
    if (e && e->run == Run::kReturn) {  // out of a function, at each call
      auto f = body_of_.find(block);
      if (f == body_of_.end() || CallSites(*f->second).empty()) return false;
      for (const Use& call : CallSites(*f->second))
        if (u.operand >= call.op->results.size() ||
            !Consumers(call.op->results[u.operand], call.block, out, depth + 1))
          return false;
      return true;
    }
    if (e && e->run == Run::kCall) {  // into the callee
      const Func* f = m_.FindFunc(u.op->callee);
      if (f == nullptr || CallSites(*f).empty() || f->body.blocks.size() != 1 ||
          u.operand >= f->body.blocks[0].args.size())
        return false;
      return Consumers(f->body.blocks[0].args[u.operand], &f->body.blocks[0], out, depth + 1);
    }
    out.push_back(u);
    return true;
  }

  // v holds one value in every element, a constant: a splat (or one-element)
  // stablehlo.constant, a broadcast or reshape of one, or an argument of a
  // private function that every call gives one.
  bool SplatConstant(int v, const Block* block, int depth) const {
    if (depth > kMaxDepth) return false;
    const Op* p = producer_[static_cast<size_t>(v)];
    if (p == nullptr) {  // an argument
      auto f = body_of_.find(block);
      if (f == body_of_.end() || CallSites(*f->second).empty()) return false;
      size_t k = 0;
      while (k < block->args.size() && block->args[k] != v) ++k;
      for (const Use& call : CallSites(*f->second))
        if (k >= call.op->operands.size() || !SplatConstant(call.op->operands[k], call.block, depth + 1))
          return false;
      return true;
    }
    if (p->name == "stablehlo.broadcast_in_dim" || p->name == "stablehlo.reshape")
      return SplatConstant(p->operands[0], use_block_.at(p), depth + 1);
    if (p->name != "stablehlo.constant") return false;
    const Attr* value = p->Find("value");
    return value != nullptr && value->kind == Attr::Kind::kDense &&
           (value->splat || value->type.num_elements() == 1);
  }

  static bool AddOrSubtract(const Op& op) { return op.name == "stablehlo.add" || op.name == "stablehlo.subtract"; }

  static bool SameType(const Op& mul, const Op& consumer) {
    return consumer.results.size() == 1 && consumer.result_types[0] == mul.result_types[0];
  }

  const Module& m_;
  std::vector<std::vector<Use>> uses_;
  std::vector<const Op*> producer_;
  std::vector<Product> plan_;
  std::unordered_map<const Op*, const Block*> use_block_;   // op -> its block
  std::unordered_map<const Block*, const Func*> body_of_;   // a function's body block -> it
  std::unordered_map<std::string, std::vector<Use>> call_sites_;  // callee -> its calls
  std::vector<std::pair<const Op*, const Block*>> multiplies_;
};

}  // namespace

std::vector<Product> PlanProducts(const Module& m) { return Planner(m).Plan(); }

}  // namespace tpumesh::hlo
