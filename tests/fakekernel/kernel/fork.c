int nr_threads;

int fork_one(void)
{
#ifdef CONFIG_FAKE_SMP
	return ++nr_threads;
#else
	return 1;
#endif
}
