#include <cstdio>
int main() { std::puts("hookgate " HOOKGATE_VERSION); return 0; }
