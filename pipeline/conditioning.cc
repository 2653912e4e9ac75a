#include "pipeline/conditioning.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace tpumesh::pipeline {
namespace {

using mesh::Array;
using mesh::DType;

// Each text as ids [B, 77], row after row.
StatusOr<Array> TokenizeAll(const ClipTokenizer* tokenizer, const std::vector<std::string>& texts,
                            const char* what, const char* which) {
  if (tokenizer == nullptr) return FailedPreconditionError("no tokenizer (a dry run has none)");
  Array ids = Array::Host(DType::kI32, {static_cast<int64_t>(texts.size()), kPromptLength});
  for (size_t i = 0; i < texts.size(); ++i) {
    auto row = tokenizer->EncodePadded(texts[i], kPromptLength);
    if (!row.ok()) return row.status().WithContext(std::string(which) + ": " + what + " " + std::to_string(i));
    std::copy(row->begin(), row->end(), ids.mutable_data<int32_t>() + i * kPromptLength);
  }
  return ids;
}

// The encoder's batch: [uncond; cond] or [cond].
Array Rows(const Array& cond, const Array* uncond) {
  if (uncond == nullptr) return cond;
  const int64_t b = cond.dim(0);
  Array ids = Array::Host(DType::kI32, {2 * b, cond.dim(1)});
  std::memcpy(ids.mutable_data<int32_t>(), uncond->data<int32_t>(), uncond->size_bytes());
  std::memcpy(ids.mutable_data<int32_t>() + b * cond.dim(1), cond.data<int32_t>(), cond.size_bytes());
  return ids;
}

class SdConditioning : public Conditioning {
 public:
  SdConditioning(std::unique_ptr<ClipTokenizer> tokenizer, std::unique_ptr<models::ClipTextModel> encoder)
      : tokenizer_(std::move(tokenizer)), encoder_(std::move(encoder)) {}
  int context_dim() const override { return encoder_->config().hidden_size; }
  int token_arrays() const override { return 2; }
  StatusOr<std::vector<Array>> Tokenize(const std::vector<std::string>& prompts,
                                        const std::vector<std::string>& negatives) const override {
    std::vector<Array> out;
    TPUMESH_ASSIGN_OR_RETURN(Array cond, TokenizeAll(tokenizer_.get(), prompts, "prompt", "tokenizer"));
    TPUMESH_ASSIGN_OR_RETURN(Array uncond, TokenizeAll(tokenizer_.get(), negatives, "negative prompt", "tokenizer"));
    out.push_back(std::move(cond));
    out.push_back(std::move(uncond));
    return out;
  }
  StatusOr<UNetConditioning> Encode(const models::Ctx& ctx, std::span<const Array> ids,
                                    const ConditioningOptions& o) const override {
    UNetConditioning c;
    TPUMESH_ASSIGN_OR_RETURN(c.context, encoder_->Forward(ctx, Rows(ids[0], o.guided ? &ids[1] : nullptr)));
    return c;
  }
  std::vector<ComponentParams> components() const override {
    return {{"text_encoder", &encoder_->ranks(), models::ClipTextParams(encoder_->config())}};
  }
  Status CheckUNet(const models::UNetConfig& unet, const std::string& origin) const override {
    if (unet.text_time_embedding)
      return InvalidArgumentError(origin + ": the UNet takes SDXL's text_time conditioning, but the model has one "
                                  "text encoder (no text_encoder_2)");
    if (context_dim() != unet.cross_attention_dim.front())
      return InvalidArgumentError(origin + ": the text encoder's hidden_size " + std::to_string(context_dim()) +
                                  " differs from the UNet's cross_attention_dim " +
                                  std::to_string(unet.cross_attention_dim.front()));
    return OkStatus();
  }

 private:
  std::unique_ptr<ClipTokenizer> tokenizer_;
  std::unique_ptr<models::ClipTextModel> encoder_;
};

class FluxConditioning : public Conditioning {
 public:
  FluxConditioning(std::unique_ptr<ClipTokenizer> t, std::unique_ptr<models::ClipTextModel> clip,
                   std::unique_ptr<models::T5EncoderModel> t5, int64_t t5_length)
      : tokenizer_(std::move(t)), clip_(std::move(clip)), t5_(std::move(t5)), t5_length_(t5_length) {}
  int context_dim() const override { return t5_->config().d_model; }
  int token_arrays() const override { return 2; }
  int64_t token_length(int i) const override { return i == 1 ? t5_length_ : kPromptLength; }
  StatusOr<std::vector<Array>> Tokenize(const std::vector<std::string>&,
                                        const std::vector<std::string>&) const override {
    return UnimplementedError(
        "Flux's T5 tokenizer (SentencePiece) is not implemented: price Flux with `tpumesh simulate`");
  }
  StatusOr<UNetConditioning> Encode(const models::Ctx& ctx, std::span<const Array> ids,
                                    const ConditioningOptions&) const override {
    UNetConditioning c;
    models::Ctx c1 = ctx;
    c1.scope = "text_encoder";
    TPUMESH_ASSIGN_OR_RETURN(models::ClipTextModel::Outputs clip, clip_->Encode(c1, ids[0]));
    c.pooled = std::move(clip.pooled);
    models::Ctx c2 = ctx;
    c2.scope = "text_encoder_2";
    TPUMESH_ASSIGN_OR_RETURN(c.context, t5_->Forward(c2, ids[1]));
    return c;
  }
  std::vector<ComponentParams> components() const override {
    return {{"text_encoder", &clip_->ranks(), models::ClipTextParams(clip_->config())},
            {"text_encoder_2", &t5_->ranks(), models::T5EncoderParams(t5_->config())}};
  }
  Status CheckUNet(const models::UNetConfig&, const std::string& origin) const override {
    return InvalidArgumentError(origin + ": Flux's text encoders condition a FluxTransformer2DModel, not a UNet");
  }

 private:
  std::unique_ptr<ClipTokenizer> tokenizer_;
  std::unique_ptr<models::ClipTextModel> clip_;
  std::unique_ptr<models::T5EncoderModel> t5_;
  int64_t t5_length_;
};

class SdxlConditioning : public Conditioning {
 public:
  SdxlConditioning(std::unique_ptr<ClipTokenizer> t1, std::unique_ptr<models::ClipTextModel> e1,
                   std::unique_ptr<ClipTokenizer> t2, std::unique_ptr<models::ClipTextModel> e2, bool force_zeros)
      : t1_(std::move(t1)), e1_(std::move(e1)), t2_(std::move(t2)), e2_(std::move(e2)), force_zeros_(force_zeros) {}
  int context_dim() const override { return e1_->config().hidden_size + e2_->config().hidden_size; }
  int token_arrays() const override { return 4; }
  StatusOr<std::vector<Array>> Tokenize(const std::vector<std::string>& prompts,
                                        const std::vector<std::string>& negatives) const override {
    std::vector<Array> out;
    for (auto [tok, which] : {std::pair{t1_.get(), "tokenizer"}, {t2_.get(), "tokenizer_2"}}) {
      TPUMESH_ASSIGN_OR_RETURN(Array cond, TokenizeAll(tok, prompts, "prompt", which));
      TPUMESH_ASSIGN_OR_RETURN(Array uncond, TokenizeAll(tok, negatives, "negative prompt", which));
      out.push_back(std::move(cond));
      out.push_back(std::move(uncond));
    }
    return out;
  }

  StatusOr<UNetConditioning> Encode(const models::Ctx& ctx, std::span<const Array> ids,
                                    const ConditioningOptions& o) const override {
    // Zeroed negatives: the encoders see the prompts only.
    const bool zero = o.guided && !o.negatives_given && force_zeros_;
    const bool encode_uncond = o.guided && !zero;
    TPUMESH_ASSIGN_OR_RETURN(auto out1, e1_->Encode(ctx, Rows(ids[0], encode_uncond ? &ids[1] : nullptr)));
    models::Ctx ctx2 = ctx;
    ctx2.scope = "text_encoder_2";
    TPUMESH_ASSIGN_OR_RETURN(auto out2, e2_->Encode(ctx2, Rows(ids[2], encode_uncond ? &ids[3] : nullptr)));
    const int64_t b = ids[0].dim(0);
    const int64_t rows = o.guided ? 2 * b : b;
    const int64_t skip = zero ? b : 0;  // leading zero rows
    const int64_t l = ids[0].dim(1);
    const int64_t d1 = e1_->config().hidden_size, d2 = e2_->config().hidden_size;
    const int64_t p = e2_->config().projection_dim;
    UNetConditioning c;
    models::UNetModel::AddedCond added;
    TPUMESH_ASSIGN_OR_RETURN(c.context, ctx.Alloc({rows, l, d1 + d2}, "prompt_embeds"));
    TPUMESH_ASSIGN_OR_RETURN(added.text_embeds, ctx.Alloc({rows, p}, "pooled_prompt_embeds"));
    added.time_ids.resize(rows * 6);
    for (int64_t r = 0; r < rows; ++r) std::copy(o.time_ids.begin(), o.time_ids.end(), added.time_ids.begin() + r * 6);
    if (!ctx.dry_run) {
      float* ctx_out = c.context.mutable_data<float>();
      float* pooled = added.text_embeds.mutable_data<float>();
      std::fill(ctx_out, ctx_out + skip * l * (d1 + d2), 0.0f);
      std::fill(pooled, pooled + skip * p, 0.0f);
      const float* a = out1.penultimate.data<float>();
      const float* bb = out2.penultimate.data<float>();
      for (int64_t t = 0; t < (rows - skip) * l; ++t) {
        float* dst = ctx_out + (skip * l + t) * (d1 + d2);
        std::memcpy(dst, a + t * d1, d1 * sizeof(float));
        std::memcpy(dst + d1, bb + t * d2, d2 * sizeof(float));
      }
      std::memcpy(pooled + skip * p, out2.text_embeds.data<float>(), (rows - skip) * p * sizeof(float));
    }
    c.added = std::move(added);
    return c;
  }

  std::vector<ComponentParams> components() const override {
    return {{"text_encoder", &e1_->ranks(), models::ClipTextParams(e1_->config())},
            {"text_encoder_2", &e2_->ranks(), models::ClipTextParams(e2_->config())}};
  }

  Status CheckUNet(const models::UNetConfig& unet, const std::string& origin) const override {
    if (!e2_->config().with_projection)
      return InvalidArgumentError(origin + ": text_encoder_2 must be a CLIPTextModelWithProjection (SDXL's pooled "
                                  "text_embeds come from its text_projection)");
    if (!unet.text_time_embedding)
      return InvalidArgumentError(origin + ": an SDXL model (two text encoders) needs a UNet with "
                                  "addition_embed_type \"text_time\"");
    if (context_dim() != unet.cross_attention_dim.front())
      return InvalidArgumentError(origin + ": the text encoders' widths " + std::to_string(e1_->config().hidden_size) +
                                  " + " + std::to_string(e2_->config().hidden_size) +
                                  " differ from the UNet's cross_attention_dim " +
                                  std::to_string(unet.cross_attention_dim.front()));
    const int want = unet.projection_class_embeddings_input_dim - 6 * unet.addition_time_embed_dim;
    if (e2_->config().projection_dim != want)
      return InvalidArgumentError(origin + ": text_encoder_2's projection_dim " +
                                  std::to_string(e2_->config().projection_dim) + " differs from the " +
                                  std::to_string(want) +
                                  " the UNet expects (projection_class_embeddings_input_dim - 6 x "
                                  "addition_time_embed_dim)");
    return OkStatus();
  }

 private:
  std::unique_ptr<ClipTokenizer> t1_;
  std::unique_ptr<models::ClipTextModel> e1_;
  std::unique_ptr<ClipTokenizer> t2_;
  std::unique_ptr<models::ClipTextModel> e2_;
  bool force_zeros_;
};

}  // namespace

std::unique_ptr<Conditioning> MakeSdConditioning(std::unique_ptr<ClipTokenizer> tokenizer,
                                                 std::unique_ptr<models::ClipTextModel> text_encoder) {
  return std::make_unique<SdConditioning>(std::move(tokenizer), std::move(text_encoder));
}

std::unique_ptr<Conditioning> MakeSdxlConditioning(std::unique_ptr<ClipTokenizer> tokenizer,
                                                   std::unique_ptr<models::ClipTextModel> text_encoder,
                                                   std::unique_ptr<ClipTokenizer> tokenizer_2,
                                                   std::unique_ptr<models::ClipTextModel> text_encoder_2,
                                                   bool force_zeros_for_empty_prompt) {
  return std::make_unique<SdxlConditioning>(std::move(tokenizer), std::move(text_encoder), std::move(tokenizer_2),
                                            std::move(text_encoder_2), force_zeros_for_empty_prompt);
}

std::unique_ptr<Conditioning> MakeFluxConditioning(std::unique_ptr<ClipTokenizer> tokenizer,
                                                   std::unique_ptr<models::ClipTextModel> text_encoder,
                                                   std::unique_ptr<models::T5EncoderModel> text_encoder_2,
                                                   int64_t t5_length) {
  return std::make_unique<FluxConditioning>(std::move(tokenizer), std::move(text_encoder), std::move(text_encoder_2),
                                            t5_length);
}

}  // namespace tpumesh::pipeline
