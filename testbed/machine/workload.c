/*
 * The machine scenario's workload (images/machine/node-images.ts packs it, static, as
 * liken.local/workload): it runs until SIGTERM, then says so and stays the number of seconds
 * given as its argument before it exits, so that a pod's stop takes a time the test can see
 * and that must fit its terminationGracePeriodSeconds.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static volatile sig_atomic_t terminated;

static void on_term(int sig) {
  (void)sig;
  terminated = 1;
}

int main(int argc, char **argv) {
  int linger = argc > 1 ? atoi(argv[1]) : 0;
  signal(SIGTERM, on_term);
  printf("workload: running\n");
  fflush(stdout);
  while (!terminated) pause();
  printf("workload: SIGTERM, stopping in %d s\n", linger);
  fflush(stdout);
  sleep((unsigned)linger);
  printf("workload: stopped\n");
  return 0;
}
