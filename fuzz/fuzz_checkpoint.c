// Training-state checkpoints (state_S.bin, llmc/checkpoint.h): the header
// (read_state_header), then, for a config small enough, the AdamW tensors and the
// CRC (read_state_tensors), as train_gpt2's resume reads them.
#include "../llmc/checkpoint.h"
#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) { fuzz_quiet_stdout(); return 0; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("state.bin", data, size);
    TrainState s;
    int header[256];
    char err[4096 + 256];
    if (read_state_header(path, &s, header, err, sizeof(err)) != 0) {
        fuzz_check(err[0] != '\0' && strchr(err, '\n') == NULL, "a one-line error message: [%s]", err);
        return 0;
    }
    // the run's model: the state's own config when it is a valid one (a resume
    // refuses any other)
    if (gpt2_config_error(&s.config, path, err, sizeof(err)) != 0) { return 0; }
    size_t sizes[NUM_PARAMETER_TENSORS], nparams = 0;
    fill_parameter_sizes(sizes, &s.config);
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) { nparams += sizes[i]; }
    if (nparams > (1u << 18)) { return 0; }
    GPT2 model;
    gpt2_create(&model, &s.config, 1, 1, path);
    if (read_state_tensors(&model, path, header, err, sizeof(err)) == 0) {
        fuzz_check(size == 1024 + 2 * nparams * sizeof(float), "a loaded state has exactly m and v");
    } else {
        fuzz_check(err[0] != '\0' && strchr(err, '\n') == NULL, "a one-line error message: [%s]", err);
    }
    gpt2_free(&model);
    return 0;
}
