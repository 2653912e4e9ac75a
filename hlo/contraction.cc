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
    // The consumers' candidates first (an add takes its left product when
    // both are), then the marks.
    std::unordered_map<const Op*, int> fused_operand;  // add/subtract -> operand index
    for (const auto& [mul, block] : multiplies_) {
      const int v = mul->results[0];
      const Use u = Consumer(v, block);
      if (u.op == nullptr || !SameType(*mul, *u.op)) continue;
      const std::string& name = u.op->name;
      if (name == "stablehlo.add" || name == "stablehlo.subtract") {
        auto [it, fresh] = fused_operand.emplace(u.op, static_cast<int>(u.operand));
        if (!fresh && static_cast<int>(u.operand) < it->second) it->second = static_cast<int>(u.operand);
      } else if (name == "stablehlo.multiply") {
        const bool c0 = SplatConstant(mul->operands[0], block), c1 = SplatConstant(mul->operands[1], block);
        const int other = u.op->operands[1 - u.operand];
        if (c0 != c1 && SplatConstant(other, use_block_.at(u.op)))
          plan_[static_cast<size_t>(v)] = c0 ? Product::kFoldedLhs : Product::kFoldedRhs;
      }
    }
    for (const auto& [mul, block] : multiplies_) {
      const Use u = Consumer(mul->results[0], block);
      auto it = u.op ? fused_operand.find(u.op) : fused_operand.end();
      if (it != fused_operand.end() && it->second == static_cast<int>(u.operand))
        plan_[static_cast<size_t>(mul->results[0])] = Product::kFused;
    }
    return std::move(plan_);
  }

 private:
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
        if (e && e->run == Run::kCall) {
          auto [it, fresh] = call_site_.emplace(op.callee, Use{&op, &b, 0});
          if (!fresh) it->second.op = nullptr;  // called from more than one place
        }
        if (kernel && op.name == "stablehlo.multiply" && op.results.size() == 1 &&
            (op.result_types[0].element == ElementType::kF32 || op.result_types[0].element == ElementType::kF64))
          multiplies_.emplace_back(&op, &b);
        for (const Region& inner : op.regions) Index(inner, kernel && e && e->op_class == OpClass::kControl);
      }
  }

  // The private function called from exactly one place, and that place.
  const Op* OnlyCall(const Func& f) const {
    if (f.is_public) return nullptr;
    auto it = call_site_.find(f.name);
    return it == call_site_.end() ? nullptr : it->second.op;
  }

  // The one use of value v (defined in `block`) in the same kernel once the
  // calls are inlined, or none.
  Use Consumer(int v, const Block* block) const {
    for (int hops = 0; hops < 64; ++hops) {
      const auto& us = uses_[static_cast<size_t>(v)];
      if (us.size() != 1 || us[0].block != block) return {};
      const Use& u = us[0];
      const OpEntry* e = EntryOf(*u.op);
      if (e && e->run == Run::kReturn) {  // out of a function called once
        auto f = body_of_.find(block);
        const Op* call = f == body_of_.end() ? nullptr : OnlyCall(*f->second);
        if (call == nullptr || u.operand >= call->results.size()) return {};
        v = call->results[u.operand];
        block = use_block_.at(call);
        continue;
      }
      if (e && e->run == Run::kCall) {  // into a function called once
        const Func* f = m_.FindFunc(u.op->callee);
        if (f == nullptr || OnlyCall(*f) != u.op || f->body.blocks.size() != 1 ||
            u.operand >= f->body.blocks[0].args.size())
          return {};
        v = f->body.blocks[0].args[u.operand];
        block = &f->body.blocks[0];
        continue;
      }
      return u;
    }
    return {};
  }

  // v holds one value in every element, a constant: a splat (or one-element)
  // stablehlo.constant, a broadcast or reshape of one, or the argument of a
  // function called once that is given one.
  bool SplatConstant(int v, const Block* block) const {
    for (int hops = 0; hops < 64; ++hops) {
      const Op* p = producer_[static_cast<size_t>(v)];
      if (p == nullptr) {  // an argument
        auto f = body_of_.find(block);
        const Op* call = f == body_of_.end() ? nullptr : OnlyCall(*f->second);
        if (call == nullptr) return false;
        const auto& args = block->args;
        size_t k = 0;
        while (k < args.size() && args[k] != v) ++k;
        if (k == args.size() || k >= call->operands.size()) return false;
        v = call->operands[k];
        block = use_block_.at(call);
        continue;
      }
      if (p->name == "stablehlo.broadcast_in_dim" || p->name == "stablehlo.reshape") {
        v = p->operands[0];
        block = use_block_.at(p);
        continue;
      }
      if (p->name != "stablehlo.constant") return false;
      const Attr* value = p->Find("value");
      return value != nullptr && value->kind == Attr::Kind::kDense &&
             (value->splat || value->type.num_elements() == 1);
    }
    return false;
  }

  static bool SameType(const Op& mul, const Op& consumer) {
    return consumer.results.size() == 1 && consumer.result_types[0] == mul.result_types[0];
  }

  const Module& m_;
  std::vector<std::vector<Use>> uses_;
  std::vector<const Op*> producer_;
  std::vector<Product> plan_;
  std::unordered_map<const Op*, const Block*> use_block_;   // op -> its block
  std::unordered_map<const Block*, const Func*> body_of_;   // a function's body block -> it
  std::unordered_map<std::string, Use> call_site_;          // callee -> its one call (op null: several)
  std::vector<std::pair<const Op*, const Block*>> multiplies_;
};

}  // namespace

std::vector<Product> PlanProducts(const Module& m) { return Planner(m).Plan(); }

}  // namespace tpumesh::hlo
