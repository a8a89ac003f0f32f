// llm.c model files (train_gpt2 -e, test_gpt2 -e, checkpoints' model_S.bin): the
// header's config check (gpt2_try_read_config), then, for a config small enough to
// allocate quickly, the arena and the parameters with their CRC (gpt2_try_load_params).
#include "../llmc/gpt2.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) { fuzz_quiet_stdout(); return 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("model.bin", data, size);
    GPT2Config config;
    char err[4096 + 256];
    if (gpt2_try_read_config(path, &config, err, sizeof(err)) != 0) {
        fuzz_check(err[0] != '\0' && strchr(err, '\n') == NULL, "a one-line error message: [%s]", err);
        return 0;
    }
    size_t sizes[NUM_PARAMETER_TENSORS], nparams = 0;
    fill_parameter_sizes(sizes, &config);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { nparams += sizes[i]; }
    if (nparams > (1u << 20)) { return 0; }  // valid but too big to allocate per input
    GPT2 model;
    gpt2_create(&model, &config, 1, 1, path);
    fuzz_check(model.num_parameters == nparams, "parameter count");
    if (gpt2_try_load_params(&model, path, err, sizeof(err)) == 0) {
        fuzz_check(size == 1024 + nparams * sizeof(float), "a loaded model file has exactly its parameters' size");
        fuzz_check(memcmp(model.params_memory, data + 1024, sizeof(float) * sizes[0]) == 0, "wte as in the file");
        int mark, stored;
        memcpy(&mark, data + 8 * 4, 4);
        memcpy(&stored, data + 9 * 4, 4);
        fuzz_check(mark != CHECKPOINT_CRC_MARK || (uint32_t)stored == (uint32_t)crc32(0L, data + 1024, (uInt)(size - 1024)),
                   "a model file with a CRC loads only when the CRC matches");
    } else {
        fuzz_check(err[0] != '\0' && strchr(err, '\n') == NULL, "a one-line error message: [%s]", err);
    }
    gpt2_free(&model);
    return 0;
}
