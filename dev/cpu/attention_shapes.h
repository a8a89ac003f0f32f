/*
The shapes both attention harnesses (attention_forward.c, attention_backward.c) check and time.
*/
#pragma once

// amp scales the random qkv: larger amp, sharper softmax rows.
static const struct { int B, T, C, NH; float amp; const char *what; } shapes[] = {
    {4, 64, 768, 12, 1.0f, "GPT-2 124M, T=64"},
    {4, 1024, 768, 12, 1.0f, "GPT-2 124M, T=1024"},
    {4, 256, 384, 6, 1.0f, "d6"},
    {3, 29, 57, 3, 1.0f, "odd, hs=19"},
    {2, 1, 64, 2, 1.0f, "T=1"},
    {1, 100, 40, 4, 4.0f, "hs=10, sharp softmax"},
    {2, 130, 200, 8, 3.0f, "hs=25, T past two blocks"},
    {1, 300, 96, 1, 1.0f, "B*NH=1, hs=96"},
    {1, 70, 256, 2, 1.0f, "hs=128, largest supported"},
};
