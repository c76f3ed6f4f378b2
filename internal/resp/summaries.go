package resp

// summaries are the one-line descriptions COMMAND DOCS returns (redis-cli
// shows them as hints).
var summaries = map[string]string{
	"acl": "Manages users: their passwords, and the commands and keys they may use.",
	"get": "Returns the string value of a key.", "set": "Sets the string value of a key, ignoring its type; the key is created if it doesn't exist.",
	"setnx": "Sets the string value of a key only when the key doesn't exist.", "setex": "Sets the string value and expiration time (seconds) of a key.",
	"psetex": "Sets the string value and expiration time (milliseconds) of a key.", "getset": "Returns the previous string value of a key after setting it to a new value.",
	"getdel": "Returns the string value of a key after deleting the key.", "getex": "Returns the string value of a key after setting its expiration time.",
	"mget": "Atomically returns the string values of one or more keys.", "mset": "Atomically creates or modifies the string values of one or more keys.",
	"msetnx": "Atomically modifies the string values of one or more keys only when all keys don't exist.",
	"incr":   "Increments the integer value of a key by one.", "decr": "Decrements the integer value of a key by one.",
	"incrby": "Increments the integer value of a key by a number.", "decrby": "Decrements a number from the integer value of a key.",
	"incrbyfloat": "Increments the floating point value of a key by a number.", "append": "Appends a string to the value of a key.",
	"strlen": "Returns the length of a string value.", "getrange": "Returns a substring of the string stored at a key.",
	"substr": "Returns a substring from a string value.", "setrange": "Overwrites a part of a string value with another by an offset.",
	"del": "Deletes one or more keys.", "unlink": "Deletes one or more keys.", "exists": "Determines whether one or more keys exist.",
	"type": "Determines the type of value stored at a key.", "rename": "Renames a key and overwrites the destination.",
	"renamenx": "Renames a key only when the target key name doesn't exist.", "expire": "Sets the expiration time of a key in seconds.",
	"pexpire": "Sets the expiration time of a key in milliseconds.", "expireat": "Sets the expiration time of a key to a Unix timestamp.",
	"pexpireat": "Sets the expiration time of a key to a Unix milliseconds timestamp.", "ttl": "Returns the expiration time in seconds of a key.",
	"pttl": "Returns the expiration time in milliseconds of a key.", "expiretime": "Returns the expiration time of a key as a Unix timestamp.",
	"pexpiretime": "Returns the expiration time of a key as a Unix milliseconds timestamp.", "persist": "Removes the expiration time of a key.",
	"scan": "Iterates over the key names in the database.", "keys": "Returns all key names that match a pattern.",
	"dbsize": "Returns the number of keys in the database.", "flushdb": "Removes all keys from the current database.",
	"flushall": "Removes all keys from all databases.", "hset": "Creates or modifies the value of a field in a hash.",
	"hmset": "Sets the values of multiple fields.", "hsetnx": "Sets the value of a field in a hash only when the field doesn't exist.",
	"hget": "Returns the value of a field in a hash.", "hmget": "Returns the values of all fields in a hash.",
	"hgetall": "Returns all fields and values in a hash.", "hkeys": "Returns all fields in a hash.", "hvals": "Returns all values in a hash.",
	"hdel": "Deletes one or more fields and their values from a hash.", "hlen": "Returns the number of fields in a hash.",
	"hexists": "Determines whether a field exists in a hash.", "hstrlen": "Returns the length of the value of a field.",
	"hincrby": "Increments the integer value of a field in a hash by a number.", "hincrbyfloat": "Increments the floating point value of a field by a number.",
	"hscan": "Iterates over fields and values of a hash.", "multi": "Starts a transaction.", "exec": "Executes all commands in a transaction.",
	"discard": "Discards a transaction.", "watch": "Monitors changes to keys to determine the execution of a transaction.",
	"unwatch": "Forgets about watched keys of a transaction.", "ping": "Returns the server's liveliness response.",
	"echo": "Returns the given string.", "hello": "Handshakes with the Redis server.", "auth": "Authenticates the connection.",
	"select": "Changes the selected database.", "quit": "Closes the connection.", "reset": "Resets the connection.",
	"client": "A container for client connection commands.", "info": "Returns information and statistics about the server.",
	"command": "Returns detailed information about all commands.", "config": "A container for server configuration commands.",
	"time": "Returns the server time.",
}

func init() {
	for name, c := range commands {
		c.summary = summaries[name]
	}
}
