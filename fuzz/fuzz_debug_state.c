// test_gpt2's debug state (llmc/debug_state.h), for the config of
// data/ref/tiny (scripts/tests/test_gpt2.sh): debug_state_try_load.
#include "../llmc/debug_state.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_file("state.bin", data, size);
    // L=1 NH=1 C=5 maxT=7 V=11 Vp=128: the "tiny" reference config
    GPT2Config config = {.max_seq_len = 7, .vocab_size = 11, .padded_vocab_size = 128, .num_layers = 1,
                         .num_heads = 1, .channels = 5};
    DebugState s;
    char err[4096 + 256];
    if (debug_state_try_load(&s, path, &config, "model.bin", err, sizeof(err)) != 0) {
        fuzz_check(err[0] != '\0' && strchr(err, '\n') == NULL, "a one-line error message: [%s]", err);
        return 0;
    }
    size_t N = (size_t)s.B * s.T;
    fuzz_check(s.T <= config.max_seq_len, "T within the model's range");
    for (size_t i = 0; i < N; i++) {
        fuzz_check(s.x[i] >= 0 && s.x[i] < config.vocab_size && s.y[i] >= 0 && s.y[i] < config.vocab_size, "tokens");
    }
    fuzz_check(memcmp(&s.ref_grads[0], data + 1024 + 2 * N * 4 + N * 11 * 4 + 4, 4) == 0, "first gradient");
    debug_state_free(&s);
    return 0;
}
