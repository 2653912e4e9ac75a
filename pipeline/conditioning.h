// The conditioning seam of the text-to-image flow (pipeline/txt2img.h):
// everything a model family feeds the UNet besides the latents. A family is
// added here and in the family table (txt2img.h), nowhere else.
//
//   family  tokenizers  encoders                 the UNet gets, per row
//   sd      tokenizer   CLIPTextModel            context = last_hidden_state
//   sdxl    tokenizer,  CLIPTextModel,           context = cat(penultimate_1,
//           tokenizer_2 CLIPTextModelWith-                 penultimate_2) (last axis)
//                       Projection               text_embeds = encoder 2's
//                                                  projected pooled output
//                                                time_ids = original size,
//                                                  crop top-left, target size
//
//   flux    tokenizer,  CLIPTextModel,           pooled = CLIP's pooled output
//           (T5's)      T5EncoderModel           context = T5's last_hidden_state
//                                                  (512 tokens for a guidance-
//                                                  distilled transformer, FLUX.1-
//                                                  dev; 256 without, -schnell)
//   Flux has no classifier-free guidance: rows are [cond] always. Its T5
//   tokenizer (SentencePiece) is not implemented: Tokenize fails, so a Flux
//   model runs in simulate (zero ids) or on token ids given to the flow.
//
// Two halves, as in the seed's flow: Tokenize runs on the host (ids for every
// image, sharded over the data axis with the images); Encode runs on each
// device on its own rows. Rows are [uncond; cond] with classifier-free
// guidance and [cond] without, as diffusers concatenates them.
//
// Contract:
// - Tokenize returns token_arrays() arrays, each [B, 77] int32: for each
//   tokenizer in order, the prompts' ids then the negative prompts' ids.
//   diffusers semantics: SD encodes "" when no negative prompt is given; SDXL
//   with force_zeros_for_empty_prompt (its model_index.json) zeroes the
//   unconditional embeddings instead, running the encoders on the prompts
//   only, and a negative prompt given as "" is encoded, not zeroed. SDXL's
//   second prompt is the first (prompt_2 = prompt).
// - Encode honours Ctx::dry_run (shapes, allocations and op records only) and
//   records every layer it runs in Ctx::ops.
// - Thread-safe after construction: every device of a pmap calls Encode.
#ifndef TPUMESH_PIPELINE_CONDITIONING_H_
#define TPUMESH_PIPELINE_CONDITIONING_H_

#include <array>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "mesh/array.h"
#include "models/clip.h"
#include "models/t5.h"
#include "models/nn.h"
#include "models/params.h"
#include "models/unet.h"
#include "text/tokenizer.h"

namespace tpumesh::pipeline {

inline constexpr int kPromptLength = 77;  // CLIP's model_max_length

// SDXL's micro-conditioning, each (height, width) or (top, left) in pixels,
// in the order diffusers' _get_add_time_ids concatenates them.
struct SizeConditioning {
  std::array<int, 2> original_size{0, 0};         // (h, w); 0: the image size
  std::array<int, 2> crops_coords_top_left{0, 0};  // (top, left)
  std::array<int, 2> target_size{0, 0};           // (h, w); 0: the image size
};

struct ConditioningOptions {
  bool guided = true;             // rows [uncond; cond]; false: [cond]
  bool negatives_given = false;   // a negative prompt was passed (even "")
  std::array<float, 6> time_ids{};  // SDXL's add_time_ids for every row
};

struct UNetConditioning {
  mesh::Array context;  // encoder_hidden_states [rows, 77 (Flux: T5's length), D]
  std::optional<models::UNetModel::AddedCond> added;  // SDXL
  mesh::Array pooled;   // Flux: pooled_projections [rows, D_clip]
};

// A component's parameters: one map per model rank (models/params.h) and the
// manifest they were split from.
struct ComponentParams {
  std::string name;  // "text_encoder", "text_encoder_2", "unet", "vae"
  const std::vector<models::ParamMap>* ranks = nullptr;
  std::vector<models::ParamSpec> manifest;
};

class Conditioning {
 public:
  virtual ~Conditioning() = default;
  // The width the UNet's cross-attention must have.
  virtual int context_dim() const = 0;
  virtual int token_arrays() const = 0;
  // The length of Tokenize's array i (77, CLIP's; Flux's T5 array differs).
  virtual int64_t token_length(int i) const { return kPromptLength; }
  // Host: prompts and negatives are one per image (B each).
  virtual StatusOr<std::vector<mesh::Array>> Tokenize(const std::vector<std::string>& prompts,
                                                      const std::vector<std::string>& negatives) const = 0;
  // Device: `ids` are this device's rows of each Tokenize array.
  virtual StatusOr<UNetConditioning> Encode(const models::Ctx& ctx, std::span<const mesh::Array> ids,
                                            const ConditioningOptions& options) const = 0;
  // The encoders' parameters, per model rank.
  virtual std::vector<ComponentParams> components() const = 0;
  // Checks the encoders against the UNet that will read their output
  // (InvalidArgument naming both widths).
  virtual Status CheckUNet(const models::UNetConfig& unet, const std::string& origin) const = 0;
};

// One encoder and its tokenizer. The tokenizer may be null for a dry run
// (Tokenize then fails).
std::unique_ptr<Conditioning> MakeSdConditioning(std::unique_ptr<ClipTokenizer> tokenizer,
                                                 std::unique_ptr<models::ClipTextModel> text_encoder);
// SDXL: text_encoder_2 must be a CLIPTextModelWithProjection.
std::unique_ptr<Conditioning> MakeSdxlConditioning(std::unique_ptr<ClipTokenizer> tokenizer,
                                                   std::unique_ptr<models::ClipTextModel> text_encoder,
                                                   std::unique_ptr<ClipTokenizer> tokenizer_2,
                                                   std::unique_ptr<models::ClipTextModel> text_encoder_2,
                                                   bool force_zeros_for_empty_prompt);
// Flux: CLIP's pooled output and T5's states of t5_length tokens.
std::unique_ptr<Conditioning> MakeFluxConditioning(std::unique_ptr<ClipTokenizer> tokenizer,
                                                   std::unique_ptr<models::ClipTextModel> text_encoder,
                                                   std::unique_ptr<models::T5EncoderModel> text_encoder_2,
                                                   int64_t t5_length);

}  // namespace tpumesh::pipeline

#endif  // TPUMESH_PIPELINE_CONDITIONING_H_
