"""The lab without Docker: the same services as docker-compose.yml, as local processes on 127.0.0.1.

`joinlab lab up|down|ps|logs|generate` (and `make up-native`, `make down`, ...) drive `lab`;
`procs` owns PID files and stopping process trees, `settings` ports and `.env`, `services` how
each service starts and when it is healthy. Everything lives under $LAB_HOME (default .lab/).
"""
