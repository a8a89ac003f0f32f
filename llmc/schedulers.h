/*
Learning-rate schedules, as llm.c's: a linear warmup over the first
warmup_steps, then a decay from the peak to final_fraction * peak at the last
step, along a cosine (default) or a straight line; or constant after warmup.
The rate is a function of the step alone, so a resumed run needs no state.
*/
#pragma once

#include <math.h>
#include <string.h>

typedef enum { SCHEDULE_COSINE, SCHEDULE_LINEAR, SCHEDULE_CONSTANT } ScheduleKind;

static const char *const SCHEDULE_NAMES[] = {"cosine", "linear", "constant"};

// The schedule called name, or -1.
static int schedule_from_name(const char *name) {
    for (int i = 0; i < 3; i++) {
        if (strcmp(name, SCHEDULE_NAMES[i]) == 0) { return i; }
    }
    return -1;
}

typedef struct {
    ScheduleKind kind;
    float peak;            // learning rate after warmup
    int warmup_steps;
    int total_steps;       // the decay reaches its end at the last step, total_steps - 1
    float final_fraction;  // of the peak
} Schedule;

// The learning rate of step (counting from 0).
static float schedule_lr(const Schedule *s, int step) {
    if (step < s->warmup_steps) { return s->peak * (float)(step + 1) / (float)s->warmup_steps; }
    if (s->kind == SCHEDULE_CONSTANT) { return s->peak; }
    const float min_lr = s->peak * s->final_fraction;
    const int decay_steps = s->total_steps - 1 - s->warmup_steps;
    const float ratio = decay_steps > 0 ? (float)(step - s->warmup_steps) / (float)decay_steps : 1.0f;
    if (s->kind == SCHEDULE_LINEAR) { return s->peak - (s->peak - min_lr) * ratio; }
    const float coeff = 0.5f * (1.0f + cosf((float)M_PI * ratio));
    return min_lr + coeff * (s->peak - min_lr);
}
