#include "models/architectures.h"

namespace tpumesh::models {
namespace {

// CLIP ViT-L/14 text tower (openai/clip-vit-large-patch14), as in SD 1.x.
constexpr char kClipL[] = R"({
  "architectures": ["CLIPTextModel"], "model_type": "clip_text_model",
  "hidden_act": "quick_gelu", "hidden_size": 768, "intermediate_size": 3072,
  "layer_norm_eps": 1e-05, "max_position_embeddings": 77, "num_attention_heads": 12,
  "num_hidden_layers": 12, "projection_dim": 768, "vocab_size": 49408,
  "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1, "torch_dtype": "float32"
})";

// OpenCLIP ViT-H/14 text tower as shipped in stabilityai/stable-diffusion-2-1.
constexpr char kClipH[] = R"({
  "architectures": ["CLIPTextModel"], "model_type": "clip_text_model",
  "hidden_act": "gelu", "hidden_size": 1024, "intermediate_size": 4096,
  "layer_norm_eps": 1e-05, "max_position_embeddings": 77, "num_attention_heads": 16,
  "num_hidden_layers": 23, "projection_dim": 512, "vocab_size": 49408,
  "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1, "torch_dtype": "float32"
})";

// OpenCLIP ViT-bigG/14 text tower with projection (SDXL text_encoder_2).
constexpr char kClipBigG[] = R"({
  "architectures": ["CLIPTextModelWithProjection"], "model_type": "clip_text_model",
  "hidden_act": "gelu", "hidden_size": 1280, "intermediate_size": 5120,
  "layer_norm_eps": 1e-05, "max_position_embeddings": 77, "num_attention_heads": 20,
  "num_hidden_layers": 32, "projection_dim": 1280, "vocab_size": 49408,
  "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1, "torch_dtype": "float32"
})";

constexpr char kUNetSd15[] = R"({
  "_class_name": "UNet2DConditionModel", "_diffusers_version": "0.6.0",
  "act_fn": "silu", "attention_head_dim": 8, "block_out_channels": [320, 640, 1280, 1280],
  "center_input_sample": false, "cross_attention_dim": 768,
  "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
  "downsample_padding": 1, "flip_sin_to_cos": true, "freq_shift": 0, "in_channels": 4,
  "layers_per_block": 2, "mid_block_scale_factor": 1, "norm_eps": 1e-05, "norm_num_groups": 32,
  "out_channels": 4, "sample_size": 64,
  "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"]
})";

constexpr char kUNetSd21[] = R"({
  "_class_name": "UNet2DConditionModel", "_diffusers_version": "0.10.0.dev0",
  "act_fn": "silu", "attention_head_dim": [5, 10, 20, 20], "block_out_channels": [320, 640, 1280, 1280],
  "center_input_sample": false, "cross_attention_dim": 1024,
  "down_block_types": ["CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D", "DownBlock2D"],
  "downsample_padding": 1, "dual_cross_attention": false, "flip_sin_to_cos": true, "freq_shift": 0,
  "in_channels": 4, "layers_per_block": 2, "mid_block_scale_factor": 1, "norm_eps": 1e-05,
  "norm_num_groups": 32, "num_class_embeds": null, "only_cross_attention": false, "out_channels": 4,
  "sample_size": 96,
  "up_block_types": ["UpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "CrossAttnUpBlock2D"],
  "upcast_attention": true, "use_linear_projection": true
})";

constexpr char kUNetSdxl[] = R"({
  "_class_name": "UNet2DConditionModel", "_diffusers_version": "0.19.0.dev0",
  "act_fn": "silu", "addition_embed_type": "text_time", "addition_embed_type_num_heads": 64,
  "addition_time_embed_dim": 256, "attention_head_dim": [5, 10, 20],
  "block_out_channels": [320, 640, 1280], "center_input_sample": false,
  "class_embed_type": null, "class_embeddings_concat": false, "conv_in_kernel": 3, "conv_out_kernel": 3,
  "cross_attention_dim": 2048, "cross_attention_norm": null,
  "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D", "CrossAttnDownBlock2D"],
  "downsample_padding": 1, "dual_cross_attention": false, "encoder_hid_dim": null,
  "encoder_hid_dim_type": null, "flip_sin_to_cos": true, "freq_shift": 0, "in_channels": 4,
  "layers_per_block": 2, "mid_block_only_cross_attention": null, "mid_block_scale_factor": 1,
  "mid_block_type": "UNetMidBlock2DCrossAttn", "norm_eps": 1e-05, "norm_num_groups": 32,
  "num_attention_heads": null, "num_class_embeds": null, "only_cross_attention": false,
  "out_channels": 4, "projection_class_embeddings_input_dim": 2816, "resnet_out_scale_factor": 1.0,
  "resnet_skip_time_act": false, "resnet_time_scale_shift": "default", "sample_size": 128,
  "time_cond_proj_dim": null, "time_embedding_act_fn": null, "time_embedding_dim": null,
  "time_embedding_type": "positional", "timestep_post_act": null, "transformer_layers_per_block": [1, 2, 10],
  "up_block_types": ["CrossAttnUpBlock2D", "CrossAttnUpBlock2D", "UpBlock2D"],
  "upcast_attention": null, "use_linear_projection": true
})";

constexpr char kVaeSd[] = R"({
  "_class_name": "AutoencoderKL", "_diffusers_version": "0.6.0", "act_fn": "silu",
  "block_out_channels": [128, 256, 512, 512],
  "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D"],
  "in_channels": 3, "latent_channels": 4, "layers_per_block": 2, "norm_num_groups": 32,
  "out_channels": 3, "sample_size": 512,
  "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D"]
})";

constexpr char kVaeSd21[] = R"({
  "_class_name": "AutoencoderKL", "_diffusers_version": "0.10.0.dev0", "act_fn": "silu",
  "block_out_channels": [128, 256, 512, 512],
  "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D"],
  "in_channels": 3, "latent_channels": 4, "layers_per_block": 2, "norm_num_groups": 32,
  "out_channels": 3, "sample_size": 768,
  "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D"]
})";

constexpr char kVaeSdxl[] = R"({
  "_class_name": "AutoencoderKL", "_diffusers_version": "0.20.0.dev0", "act_fn": "silu",
  "block_out_channels": [128, 256, 512, 512],
  "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D"],
  "force_upcast": true, "in_channels": 3, "latent_channels": 4, "layers_per_block": 2,
  "norm_num_groups": 32, "out_channels": 3, "sample_size": 1024, "scaling_factor": 0.13025,
  "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D"]
})";

constexpr char kPndmSd[] = R"({
  "_class_name": "PNDMScheduler", "_diffusers_version": "0.6.0", "beta_end": 0.012,
  "beta_schedule": "scaled_linear", "beta_start": 0.00085, "num_train_timesteps": 1000,
  "set_alpha_to_one": false, "skip_prk_steps": true, "steps_offset": 1, "trained_betas": null,
  "clip_sample": false
})";

constexpr char kDdimSd21[] = R"({
  "_class_name": "DDIMScheduler", "_diffusers_version": "0.10.0.dev0", "beta_end": 0.012,
  "beta_schedule": "scaled_linear", "beta_start": 0.00085, "clip_sample": false,
  "num_train_timesteps": 1000, "prediction_type": "v_prediction", "set_alpha_to_one": false,
  "skip_prk_steps": true, "steps_offset": 1, "trained_betas": null
})";

constexpr char kEulerSdxl[] = R"({
  "_class_name": "EulerDiscreteScheduler", "_diffusers_version": "0.19.0.dev0", "beta_end": 0.012,
  "beta_schedule": "scaled_linear", "beta_start": 0.00085, "clip_sample": false,
  "interpolation_type": "linear", "num_train_timesteps": 1000, "prediction_type": "epsilon",
  "sample_max_value": 1.0, "set_alpha_to_one": false, "skip_prk_steps": true, "steps_offset": 1,
  "timestep_spacing": "leading", "trained_betas": null, "use_karras_sigmas": false
})";

constexpr char kIndexSd[] = R"({
  "_class_name": "StableDiffusionPipeline", "_diffusers_version": "0.6.0",
  "scheduler": ["diffusers", "PNDMScheduler"], "text_encoder": ["transformers", "CLIPTextModel"],
  "tokenizer": ["transformers", "CLIPTokenizer"], "unet": ["diffusers", "UNet2DConditionModel"],
  "vae": ["diffusers", "AutoencoderKL"]
})";

constexpr char kIndexSd21[] = R"({
  "_class_name": "StableDiffusionPipeline", "_diffusers_version": "0.10.0.dev0",
  "scheduler": ["diffusers", "DDIMScheduler"], "text_encoder": ["transformers", "CLIPTextModel"],
  "tokenizer": ["transformers", "CLIPTokenizer"], "unet": ["diffusers", "UNet2DConditionModel"],
  "vae": ["diffusers", "AutoencoderKL"]
})";

constexpr char kIndexSdxl[] = R"({
  "_class_name": "StableDiffusionXLPipeline", "_diffusers_version": "0.19.0.dev0",
  "force_zeros_for_empty_prompt": true, "scheduler": ["diffusers", "EulerDiscreteScheduler"],
  "text_encoder": ["transformers", "CLIPTextModel"],
  "text_encoder_2": ["transformers", "CLIPTextModelWithProjection"],
  "tokenizer": ["transformers", "CLIPTokenizer"], "tokenizer_2": ["transformers", "CLIPTokenizer"],
  "unet": ["diffusers", "UNet2DConditionModel"], "vae": ["diffusers", "AutoencoderKL"]
})";

// tiny: the tiny-sd-a reference model's configs (../shared/refdata).
constexpr char kClipTiny[] = R"({
  "architectures": ["CLIPTextModel"], "model_type": "clip_text_model",
  "hidden_act": "quick_gelu", "hidden_size": 32, "intermediate_size": 37, "layer_norm_eps": 1e-05,
  "max_position_embeddings": 77, "num_attention_heads": 4, "num_hidden_layers": 5,
  "projection_dim": 512, "vocab_size": 1000, "bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1
})";

constexpr char kUNetTiny[] = R"({
  "_class_name": "UNet2DConditionModel", "_diffusers_version": "0.30.0", "act_fn": "silu",
  "attention_head_dim": 8, "block_out_channels": [32, 64], "center_input_sample": false,
  "conv_in_kernel": 3, "conv_out_kernel": 3, "cross_attention_dim": 32,
  "down_block_types": ["DownBlock2D", "CrossAttnDownBlock2D"], "downsample_padding": 1,
  "flip_sin_to_cos": true, "freq_shift": 0, "in_channels": 4, "layers_per_block": 2,
  "mid_block_scale_factor": 1, "mid_block_type": "UNetMidBlock2DCrossAttn", "norm_eps": 1e-05,
  "norm_num_groups": 32, "out_channels": 4, "sample_size": 32, "time_embedding_type": "positional",
  "transformer_layers_per_block": 1, "up_block_types": ["CrossAttnUpBlock2D", "UpBlock2D"],
  "upcast_attention": false, "use_linear_projection": false
})";

constexpr char kVaeTiny[] = R"({
  "_class_name": "AutoencoderKL", "_diffusers_version": "0.30.0", "act_fn": "silu",
  "block_out_channels": [32, 64], "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D"],
  "in_channels": 3, "latent_channels": 4, "layers_per_block": 1, "mid_block_add_attention": true,
  "norm_num_groups": 32, "out_channels": 3, "sample_size": 64, "scaling_factor": 0.18215,
  "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D"], "use_post_quant_conv": true,
  "use_quant_conv": true
})";

constexpr char kPndmTiny[] = R"({
  "_class_name": "PNDMScheduler", "_diffusers_version": "0.30.0", "beta_end": 0.012,
  "beta_schedule": "scaled_linear", "beta_start": 0.00085, "clip_sample": false,
  "num_train_timesteps": 1000, "prediction_type": "epsilon", "set_alpha_to_one": false,
  "skip_prk_steps": true, "steps_offset": 1, "timestep_spacing": "leading", "trained_betas": null
})";

// FLUX.1: the configs of black-forest-labs/FLUX.1-dev and
// black-forest-labs/FLUX.1-schnell on the Hugging Face Hub (model_index.json,
// transformer/, text_encoder_2/, vae/, scheduler/); text_encoder is kClipL.
constexpr char kIndexFlux[] = R"({
  "_class_name": "FluxPipeline", "_diffusers_version": "0.30.0.dev0",
  "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"], "text_encoder": ["transformers", "CLIPTextModel"],
  "text_encoder_2": ["transformers", "T5EncoderModel"], "tokenizer": ["transformers", "CLIPTokenizer"],
  "tokenizer_2": ["transformers", "T5TokenizerFast"], "transformer": ["diffusers", "FluxTransformer2DModel"],
  "vae": ["diffusers", "AutoencoderKL"]
})";

constexpr char kFluxDev[] = R"({
  "_class_name": "FluxTransformer2DModel", "_diffusers_version": "0.30.0.dev0", "attention_head_dim": 128,
  "guidance_embeds": true, "in_channels": 64, "joint_attention_dim": 4096, "num_attention_heads": 24,
  "num_layers": 19, "num_single_layers": 38, "patch_size": 1, "pooled_projection_dim": 768
})";

constexpr char kFluxSchnell[] = R"({
  "_class_name": "FluxTransformer2DModel", "_diffusers_version": "0.30.0.dev0", "attention_head_dim": 128,
  "guidance_embeds": false, "in_channels": 64, "joint_attention_dim": 4096, "num_attention_heads": 24,
  "num_layers": 19, "num_single_layers": 38, "patch_size": 1, "pooled_projection_dim": 768
})";

// google/t5-v1_1-xxl's encoder, as FLUX.1's text_encoder_2/config.json.
constexpr char kT5Xxl[] = R"({
  "architectures": ["T5EncoderModel"], "classifier_dropout": 0.0, "d_ff": 10240, "d_kv": 64, "d_model": 4096,
  "decoder_start_token_id": 0, "dense_act_fn": "gelu_new", "dropout_rate": 0.1, "eos_token_id": 1,
  "feed_forward_proj": "gated-gelu", "initializer_factor": 1.0, "is_encoder_decoder": true, "is_gated_act": true,
  "layer_norm_epsilon": 1e-06, "model_type": "t5", "num_decoder_layers": 24, "num_heads": 64, "num_layers": 24,
  "output_past": true, "pad_token_id": 0, "relative_attention_max_distance": 128,
  "relative_attention_num_buckets": 32, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "use_cache": true, "vocab_size": 32128
})";

constexpr char kVaeFlux[] = R"({
  "_class_name": "AutoencoderKL", "_diffusers_version": "0.30.0.dev0", "act_fn": "silu",
  "block_out_channels": [128, 256, 512, 512],
  "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D"],
  "force_upcast": true, "in_channels": 3, "latent_channels": 16, "latents_mean": null, "latents_std": null,
  "layers_per_block": 2, "mid_block_add_attention": true, "norm_num_groups": 32, "out_channels": 3,
  "sample_size": 1024, "scaling_factor": 0.3611, "shift_factor": 0.1159,
  "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D"],
  "use_post_quant_conv": false, "use_quant_conv": false
})";

constexpr char kFlowMatchDev[] = R"({
  "_class_name": "FlowMatchEulerDiscreteScheduler", "_diffusers_version": "0.30.0.dev0",
  "base_image_seq_len": 256, "base_shift": 0.5, "max_image_seq_len": 4096, "max_shift": 1.15,
  "num_train_timesteps": 1000, "shift": 3.0, "use_dynamic_shifting": true
})";

constexpr char kFlowMatchSchnell[] = R"({
  "_class_name": "FlowMatchEulerDiscreteScheduler", "_diffusers_version": "0.29.0.dev0",
  "num_train_timesteps": 1000, "shift": 1.0
})";

// flux-tiny: FLUX.1-dev's structure (guidance embedding, dynamic shifting)
// at test sizes; tpumesh's own, not a published model.
constexpr char kFluxTiny[] = R"({
  "_class_name": "FluxTransformer2DModel", "attention_head_dim": 16, "axes_dims_rope": [4, 6, 6],
  "guidance_embeds": true, "in_channels": 16, "joint_attention_dim": 32, "num_attention_heads": 2,
  "num_layers": 1, "num_single_layers": 2, "patch_size": 1, "pooled_projection_dim": 32
})";

constexpr char kT5Tiny[] = R"({
  "architectures": ["T5EncoderModel"], "d_ff": 37, "d_kv": 8, "d_model": 32, "dense_act_fn": "gelu_new",
  "feed_forward_proj": "gated-gelu", "layer_norm_epsilon": 1e-06, "model_type": "t5", "num_heads": 4,
  "num_layers": 2, "relative_attention_max_distance": 128, "relative_attention_num_buckets": 32, "vocab_size": 1000
})";

constexpr char kVaeFluxTiny[] = R"({
  "_class_name": "AutoencoderKL", "act_fn": "silu", "block_out_channels": [32, 64],
  "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D"], "in_channels": 3, "latent_channels": 4,
  "layers_per_block": 1, "mid_block_add_attention": true, "norm_num_groups": 32, "out_channels": 3,
  "sample_size": 64, "scaling_factor": 0.3611, "shift_factor": 0.1159,
  "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D"], "use_post_quant_conv": false, "use_quant_conv": false
})";

}  // namespace

std::vector<std::string> ArchitectureNames() {
  return {"sd15", "sd21", "sdxl", "tiny", "flux-dev", "flux-schnell", "flux-tiny"};
}

StatusOr<Architecture> BuiltinArchitecture(std::string_view name) {
  Architecture a;
  a.name = std::string(name);
  if (name == "sd15") {
    a.description = "Stable Diffusion 1.5 (runwayml/stable-diffusion-v1-5)";
    a.model_index = kIndexSd;
    a.text_encoder = kClipL;
    a.unet = kUNetSd15;
    a.vae = kVaeSd;
    a.scheduler = kPndmSd;
    a.default_image_size = 512;
  } else if (name == "sd21") {
    a.description = "Stable Diffusion 2.1 (stabilityai/stable-diffusion-2-1, v-prediction)";
    a.model_index = kIndexSd21;
    a.text_encoder = kClipH;
    a.unet = kUNetSd21;
    a.vae = kVaeSd21;
    a.scheduler = kDdimSd21;
    a.default_image_size = 768;
  } else if (name == "sdxl") {
    a.description = "Stable Diffusion XL base 1.0 (stabilityai/stable-diffusion-xl-base-1.0)";
    a.model_index = kIndexSdxl;
    a.text_encoder = kClipL;
    a.text_encoder_2 = kClipBigG;
    a.unet = kUNetSdxl;
    a.vae = kVaeSdxl;
    a.scheduler = kEulerSdxl;
    a.default_image_size = 1024;
  } else if (name == "tiny") {
    a.description = "tiny SD 1.x-shaped test model (the tiny-sd-a reference configs)";
    a.model_index = kIndexSd;
    a.text_encoder = kClipTiny;
    a.unet = kUNetTiny;
    a.vae = kVaeTiny;
    a.scheduler = kPndmTiny;
    a.default_image_size = 64;
  } else if (name == "flux-dev" || name == "flux-schnell") {
    const bool dev = name == "flux-dev";
    a.description = dev ? "FLUX.1 [dev] (black-forest-labs/FLUX.1-dev, guidance-distilled)"
                        : "FLUX.1 [schnell] (black-forest-labs/FLUX.1-schnell, timestep-distilled)";
    a.model_index = kIndexFlux;
    a.text_encoder = kClipL;
    a.text_encoder_2 = kT5Xxl;
    a.transformer = dev ? kFluxDev : kFluxSchnell;
    a.vae = kVaeFlux;
    a.scheduler = dev ? kFlowMatchDev : kFlowMatchSchnell;
    a.default_image_size = 1024;
  } else if (name == "flux-tiny") {
    a.description = "tiny FLUX.1 [dev]-shaped test model";
    a.model_index = kIndexFlux;
    a.text_encoder = kClipTiny;
    a.text_encoder_2 = kT5Tiny;
    a.transformer = kFluxTiny;
    a.vae = kVaeFluxTiny;
    a.scheduler = kFlowMatchDev;
    a.default_image_size = 64;
  } else {
    std::string names;
    for (const std::string& n : ArchitectureNames()) names += (names.empty() ? "" : ", ") + n;
    return InvalidArgumentError("unknown architecture '" + std::string(name) + "' (built in: " + names + ")");
  }
  return a;
}

}  // namespace tpumesh::models
