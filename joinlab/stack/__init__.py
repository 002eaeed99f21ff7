"""The lab without Docker (`joinlab lab ...`, `make up-native`): the same services as
docker-compose.yml, as local processes on 127.0.0.1, their state and logs under $LAB_HOME."""
